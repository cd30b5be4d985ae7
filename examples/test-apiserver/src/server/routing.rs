//! From a request path and query to the resource, namespace, name and verb it addresses.

use hyper::Method;

use crate::faults::Verb;
use crate::resource::ResourceDef;

use super::Shared;

/// What a resource path addresses.
pub(super) struct Target {
    pub(super) res: ResourceDef,
    /// `None` for cluster-scoped resources and all-namespace collections.
    pub(super) namespace: Option<String>,
    pub(super) name: Option<String>,
    pub(super) status: bool,
}

pub(super) enum Route {
    Version,
    Resource(Target),
    /// A path the real server answers with a 404 for this object.
    Missing(ResourceDef, String),
    Unknown,
}

pub(super) fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segs.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::Unknown,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_string()), rest),
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some((*name).to_string()), None),
        [plural, name, sub] => (*plural, Some((*name).to_string()), Some(*sub)),
        _ => return Route::Unknown,
    };
    let Some(res) = shared.store().lookup(group, version, plural) else {
        return Route::Unknown;
    };
    let scope_ok = if res.namespaced {
        namespace.is_some() || name.is_none()
    } else {
        namespace.is_none()
    };
    let sub_ok = sub.is_none_or(|s| s == "status" && res.status_subresource);
    if !scope_ok {
        return Route::Unknown;
    }
    if !sub_ok {
        // The custom-resource handler answers an unknown subresource of an object with a 404
        // naming the object (whether it exists or not); built-in types with the generic one.
        return match name {
            Some(name) if res.custom => Route::Missing(res, name),
            _ => Route::Unknown,
        };
    }
    Route::Resource(Target {
        res,
        namespace,
        name,
        status: sub.is_some(),
    })
}

pub(super) fn percent_decode(s: &str) -> String {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push((hi * 16 + lo) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn parse_query(query: Option<&str>) -> Vec<(String, String)> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

pub(super) fn param<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

pub(super) fn verb_of(method: &Method, has_name: bool, watch: bool) -> Option<Verb> {
    Some(match *method {
        Method::GET if has_name => Verb::Get,
        Method::GET if watch => Verb::Watch,
        Method::GET => Verb::List,
        Method::POST => Verb::Create,
        Method::PUT => Verb::Update,
        Method::PATCH => Verb::Patch,
        Method::DELETE => Verb::Delete,
        _ => return None,
    })
}
