//! Redaction of secret-shaped text in a failure's output before it is
//! recorded.
//!
//! The ledger is far more widely readable than a Job's log (anyone who may
//! read the ledger ConfigMap or `MigrationLedger`), and a script that prints
//! a Secret, a token or a kubeconfig on its way to failing would otherwise
//! leave it there. Redaction works line by line on the shapes such output
//! takes: the values under a Secret's `data:`/`stringData:` (YAML and JSON),
//! `Bearer` tokens, PEM private-key blocks, JSON Web Tokens, and
//! `password=`-style assignments (also `key: value` with a secret-sounding
//! key such as kubeconfig's `client-key-data` or `token`). JSON is read as
//! JSON where it parses (a whole object, a string holding escaped JSON such
//! as kubectl's `unable to parse "{\"password\":...}"`): secret keys'
//! values, a Secret's data and a map of base64 values go. Key names are
//! secret by one rule (`is_secret_key`: a secret word at the end or as a
//! segment, so `SECRET_KEY_BASE`, `STRIPE_KEY`, `auth.password` in a
//! `--set` list). Also `curl -u user:pw`, SQL `PASSWORD '...'` and secret
//! keys in a URL's query. It errs towards redacting: the tail is there to
//! explain a failure, not to carry values.
//!
//! Redaction is the second line: the file ledger is created private
//! (0600), so a tail is not kept where others can read it.

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

/// [`REDACTED`] as a JSON string.
const QUOTED_REDACTED: &str = "\"[redacted]\"";

/// Text after redaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The text with secret-shaped values replaced by [`REDACTED`].
    pub text: String,
    /// How many values were replaced.
    pub count: usize,
}

/// Key names (lower case, `_`, `-` and `.` ignored) whose values are
/// secrets; a key matches when it ends in one (`DB_PASS`, `GITHUB_TOKEN`,
/// `aws_secret_access_key`, `.dockerconfigjson`).
const SECRET_KEYS: [&str; 20] = [
    "password",
    "passwd",
    "pass",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "privatekeyid",
    "clientkeydata",
    "clientsecret",
    "authorization",
    "auth",
    "credential",
    "credentials",
    "dockerconfigjson",
    "dockercfg",
    "cookie",
];

/// Redacts secret-shaped values in `text`. The count is the number of
/// [`REDACTED`] marks in the result, so text already redacted once (the
/// runner redacts output as it streams, see [`Redactor`]) keeps its count.
pub fn redact(text: &str) -> Redacted {
    let mut redactor = Redactor::default();
    let lines: Vec<String> = text.split('\n').filter_map(|l| redactor.line(l)).collect();
    let text = lines.join("\n");
    let count = text.matches(REDACTED).count();
    Redacted { text, count }
}

/// Redaction of a stream, one line at a time: what a line means can depend
/// on an earlier one (the values under a Secret's `data:`, a private-key
/// block, a YAML block scalar), and a kept tail of the output may no longer
/// hold that earlier line. Feeding every line through one `Redactor` before
/// the tail is cut redacts the values all the same.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    in_pem: bool,
    map: Option<SecretMap>,
    /// Indentation of a secret key whose YAML block scalar (`key: |`) is
    /// being dropped.
    block: Option<usize>,
}

/// A Secret's `data:`/`stringData:` map being redacted.
#[derive(Debug, Clone, Copy)]
enum SecretMap {
    /// YAML: the key's indentation, and its children's once seen.
    Yaml { indent: usize, child: Option<usize> },
    /// JSON: `"data": {` up to the closing `}`.
    Json,
}

impl Redactor {
    /// The line as it may be kept, or `None` when nothing of it is worth
    /// keeping (a line inside a private key or a secret block scalar: the
    /// line that opened it already says `[redacted]`).
    pub fn line(&mut self, line: &str) -> Option<String> {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if self.in_pem {
            if trimmed.contains("-----END") {
                self.in_pem = false;
            }
            return None;
        }
        if let Some(key_indent) = self.block {
            if trimmed.is_empty() || indent > key_indent {
                return None;
            }
            self.block = None;
        }
        if trimmed.starts_with("-----BEGIN") && trimmed.contains("PRIVATE KEY") {
            self.in_pem = !trimmed.contains("-----END");
            return Some(format!("{}{REDACTED} (private key)", &line[..indent]));
        }
        match &mut self.map {
            Some(SecretMap::Json) => {
                if trimmed.starts_with('}') {
                    self.map = None;
                } else if !trimmed.is_empty() {
                    return Some(redact_value(line));
                }
            }
            Some(SecretMap::Yaml {
                indent: open,
                child,
            }) => {
                if trimmed.is_empty() {
                    return Some(line.to_owned());
                }
                if indent <= *open {
                    self.map = None;
                } else {
                    let child = *child.get_or_insert(indent);
                    // Deeper than a key: the rest of a multi-line value.
                    if indent > child {
                        return None;
                    }
                    return Some(redact_value(line));
                }
            }
            None => {}
        }
        if let Some(json) = opens_secret_map(trimmed) {
            self.map = Some(if json {
                SecretMap::Json
            } else {
                SecretMap::Yaml {
                    indent,
                    child: None,
                }
            });
            return Some(line.to_owned());
        }
        if let Some((key, rest)) = trimmed.split_once(':')
            && is_secret_key(key.trim_matches(|c| c == '"' || c == '\'' || c == '-' || c == ' '))
            && is_block_indicator(rest.trim())
        {
            self.block = Some(indent);
            return Some(format!("{}{key}: {REDACTED}", &line[..indent]));
        }
        Some(redact_inline(line))
    }
}

/// A YAML block scalar's indicator: `|`, `>`, with chomping or indentation.
fn is_block_indicator(value: &str) -> bool {
    value.starts_with(['|', '>'])
        && value[1..]
            .chars()
            .all(|c| c == '-' || c == '+' || c.is_ascii_digit())
}

/// Whether `trimmed` opens a Secret's data map: `Some(false)` for YAML
/// (`data:` with nothing after it), `Some(true)` for JSON (`"data": {`).
fn opens_secret_map(trimmed: &str) -> Option<bool> {
    for key in ["data", "stringData"] {
        if trimmed == format!("{key}:") {
            return Some(false);
        }
        let json = format!("\"{key}\":");
        if trimmed
            .strip_prefix(&json)
            .is_some_and(|rest| rest.trim() == "{")
        {
            return Some(true);
        }
    }
    None
}

/// Replaces the value of a `key: value` or `"key": "value"` line inside a
/// Secret's map; a line of any other shape there is replaced whole.
fn redact_value(line: &str) -> String {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    match line.find(':') {
        Some(colon) if !line[colon + 1..].trim().is_empty() => {
            let comma = if line.trim_end().ends_with(',') {
                ","
            } else {
                ""
            };
            format!("{}: {REDACTED}{comma}", &line[..colon])
        }
        Some(_) => line.to_owned(),
        None => format!("{indent}{REDACTED}"),
    }
}

/// Redacts secrets inside an ordinary line: JSON string values of secret
/// keys (and base64-shaped ones), YAML flow maps of Secret data, URL
/// credentials, `Bearer` tokens, JSON Web Tokens, `key=value`, `key:
/// value`, `key = value` and `--key value` with a secret-sounding key, and
/// a line that is one base64 value (`jsonpath={.data.password}`).
fn redact_inline(line: &str) -> String {
    let line = redact_json(line);
    let line = redact_json_strings(&line);
    let line = redact_flow_map(&line);
    let mut words: Vec<String> = Vec::new();
    // What the next word is, after a secret key with nothing after it.
    #[derive(PartialEq)]
    enum Next {
        Plain,
        Value,
        SeparatorThenValue,
    }
    let mut next = Next::Plain;
    // Inside a quoted SQL password literal (`PASSWORD 'two words'`).
    let mut quoted: Option<char> = None;
    // The previous word, for `-u user:pw` and `IDENTIFIED BY 'pw'`.
    let mut previous = String::new();
    let mut previous_two = String::new();
    for word in line.split(' ') {
        let before = std::mem::replace(&mut previous, word.to_owned());
        let before_two = std::mem::replace(&mut previous_two, before.clone());
        if let Some(q) = quoted {
            if word.trim_end_matches([';', ',', ')']).ends_with(q) {
                quoted = None;
                let end = word.rfind(q).map_or(word.len(), |i| i + 1);
                words.push(format!("{q}{REDACTED}{q}{}", &word[end..]));
            }
            continue;
        }
        if word.is_empty() {
            words.push(String::new());
            continue;
        }
        // SQL: `PASSWORD 'x'`, `IDENTIFIED BY 'x'`: the quoted literal goes,
        // however many words it spans.
        let sql_key = before.eq_ignore_ascii_case("password")
            || (before.eq_ignore_ascii_case("by") && before_two.eq_ignore_ascii_case("identified"));
        if sql_key && let Some(q) = word.chars().next().filter(|c| matches!(c, '\'' | '"')) {
            let closes = word.len() > 1 && word[1..].trim_end_matches([';', ',', ')']).ends_with(q);
            if closes {
                let end = word.rfind(q).map_or(word.len(), |i| i + 1);
                words.push(format!("{q}{REDACTED}{q}{}", &word[end..]));
            } else {
                // The literal's words are dropped; its closing word says
                // `'[redacted]'`.
                quoted = Some(q);
            }
            next = Next::Plain;
            continue;
        }
        // `curl -u user:password`, `--user user:password`: the user stays.
        let user_flag = matches!(before.as_str(), "-u" | "--user");
        let user_pair = if user_flag {
            Some(word)
        } else {
            word.strip_prefix("--user=")
        };
        if let Some((user, pw)) = user_pair.and_then(|p| p.split_once(':'))
            && !pw.is_empty()
            && !pw.starts_with("//")
        {
            let prefix = &word[..word.len() - user.len() - pw.len() - 1];
            words.push(format!("{prefix}{user}:{REDACTED}"));
            next = Next::Plain;
            continue;
        }
        let scheme = word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic");
        match next {
            Next::Value if !scheme => {
                next = Next::Plain;
                words.push(if word.contains(REDACTED) {
                    word.to_owned()
                } else {
                    REDACTED.to_owned()
                });
                continue;
            }
            Next::SeparatorThenValue if matches!(word, "=" | ":") => {
                next = Next::Value;
                words.push(word.to_owned());
                continue;
            }
            _ => next = Next::Plain,
        }
        // `Authorization: Bearer <token>`: the scheme stays, the token goes.
        if scheme {
            next = Next::Value;
            words.push(word.to_owned());
            continue;
        }
        if let Some(w) = redact_url_credentials(word) {
            words.push(redact_url_query(&w).unwrap_or(w));
            continue;
        }
        if let Some(w) = redact_url_query(word) {
            words.push(w);
            continue;
        }
        if let Some(flag) = word.strip_prefix("--")
            && !flag.contains('=')
            && is_secret_key(flag)
        {
            next = Next::Value;
            words.push(word.to_owned());
            continue;
        }
        if let Some((at, value)) = secret_assignment(word) {
            if value.is_empty() {
                // `password: value` with the value in the next word.
                next = Next::Value;
                words.push(word.to_owned());
            } else if value.contains(REDACTED) {
                words.push(word.to_owned());
            } else {
                words.push(format!("{}{REDACTED}", &word[..at]));
            }
            continue;
        }
        if is_secret_key(word.trim_matches(|c| c == '"' || c == '\'')) {
            next = Next::SeparatorThenValue;
            words.push(word.to_owned());
            continue;
        }
        if looks_like_jwt(word) {
            words.push(REDACTED.to_owned());
            continue;
        }
        words.push(word.to_owned());
    }
    if let Some(q) = quoted {
        words.push(format!("{q}{REDACTED}"));
    }
    let out = words.join(" ");
    let trimmed = out.trim();
    if !trimmed.contains(' ') && looks_like_bare_secret(trimmed) {
        return out.replacen(trimmed, REDACTED, 1);
    }
    out
}

/// A URL's query (`?access_token=x&page=2`, `&sig=...`): the values of
/// secret keys go, the others and the path stay. `None` when `word` has no
/// URL query or nothing in it is secret.
fn redact_url_query(word: &str) -> Option<String> {
    let scheme = word.find("://")?;
    let q = scheme + word[scheme..].find('?')?;
    let mut out = word[..=q].to_owned();
    let mut changed = false;
    for (n, pair) in word[q + 1..].split('&').enumerate() {
        if n > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((k, v)) if is_secret_key(k) && !v.is_empty() && v != REDACTED => {
                out.push_str(k);
                out.push('=');
                out.push_str(REDACTED);
                changed = true;
            }
            _ => out.push_str(pair),
        }
    }
    changed.then_some(out)
}

/// JSON in a line, read as JSON: every `{...}` or `[...]` that parses, and
/// every string literal that holds JSON of its own (kubectl's `unable to
/// parse "{\"password\":...}"`, a log line's escaped body). Secret keys'
/// values go, a Secret's `data`/`stringData` and a map whose values are all
/// base64 (`jsonpath={.data}`) go whole, and every other string is redacted
/// as text of its own, so JSON escaped inside JSON is read too.
fn redact_json(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut copied = 0;
    let mut i = 0;
    while i < line.len() {
        let c = line.as_bytes()[i];
        if !matches!(c, b'{' | b'[' | b'"') {
            i += 1;
            continue;
        }
        let mut stream =
            serde_json::Deserializer::from_str(&line[i..]).into_iter::<serde_json::Value>();
        let parsed = match stream.next() {
            Some(Ok(v)) if c != b'"' || v.as_str().is_some_and(holds_json) => Some(v),
            _ => None,
        };
        let Some(mut value) = parsed else {
            i += 1;
            continue;
        };
        let end = i + stream.byte_offset();
        if redact_tree(&mut value, false) {
            out.push_str(&line[copied..i]);
            out.push_str(&value.to_string());
            copied = end;
        }
        i = end;
    }
    out.push_str(&line[copied..]);
    out
}

/// A string whose text is (or holds) JSON.
fn holds_json(text: &str) -> bool {
    text.contains("\":") || text.contains("\": ")
}

/// Redacts a parsed JSON value in place; true when anything changed.
fn redact_tree(value: &mut serde_json::Value, all: bool) -> bool {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let all = all || is_data_map(map);
            let mut changed = false;
            for (k, v) in map.iter_mut() {
                let whole = all || is_secret_key(k) || matches!(k.as_str(), "data" | "stringData");
                changed |= redact_tree(v, whole);
            }
            changed
        }
        Value::Array(items) => {
            // Every item, not only up to the first that changed.
            let mut changed = false;
            for v in items {
                changed |= redact_tree(v, all);
            }
            changed
        }
        Value::String(s) if all => {
            let changed = s != REDACTED;
            *s = REDACTED.to_owned();
            changed
        }
        Value::Number(_) | Value::Bool(_) if all => {
            *value = Value::String(REDACTED.to_owned());
            true
        }
        Value::String(s) => {
            let r = redact(s).text;
            let changed = r != *s;
            *s = r;
            changed
        }
        _ => false,
    }
}

/// A map whose values are all base64 strings, one at least with the marks
/// of encoded bytes: a Secret's data printed on its own
/// (`-o jsonpath={.data}`), whatever its keys are called.
fn is_data_map(map: &serde_json::Map<String, serde_json::Value>) -> bool {
    let shaped = |v: &str| {
        v.len() >= 4
            && v.len().is_multiple_of(4)
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
            && !v.trim_end_matches('=').contains('=')
    };
    let marked = |v: &str| {
        v.contains(|c: char| c.is_ascii_digit() || matches!(c, '+' | '/' | '='))
            || (v.contains(|c: char| c.is_ascii_uppercase())
                && v.contains(|c: char| c.is_ascii_lowercase()))
    };
    !map.is_empty()
        && map.values().all(|v| v.as_str().is_some_and(shaped))
        && map.values().any(|v| v.as_str().is_some_and(marked))
}

/// `scheme://user:password@host` keeps the user; a user part with no
/// password that is long enough to be a token goes whole.
fn redact_url_credentials(word: &str) -> Option<String> {
    let scheme_end = word.find("://")? + 3;
    let rest = &word[scheme_end..];
    let host_start = rest.find('@')?;
    if rest[..host_start].contains('/') {
        return None;
    }
    let userinfo = &rest[..host_start];
    let kept = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:{REDACTED}"),
        None if userinfo.len() > 8 => REDACTED.to_owned(),
        None => return None,
    };
    Some(format!(
        "{}{kept}{}",
        &word[..scheme_end],
        &rest[host_start..]
    ))
}

/// A YAML flow map of a Secret's data on one line: `data: {k: v, ...}`.
fn redact_flow_map(line: &str) -> String {
    let trimmed = line.trim_start();
    let is_data = ["data:", "stringData:"].iter().any(|k| {
        trimmed
            .strip_prefix(k)
            .is_some_and(|r| r.trim_start().starts_with('{'))
    });
    let (Some(open), Some(close)) = (line.find('{'), line.rfind('}')) else {
        return line.to_owned();
    };
    if !is_data || close < open {
        return line.to_owned();
    }
    let entries: Vec<String> = line[open + 1..close]
        .split(',')
        .filter(|e| !e.trim().is_empty())
        .map(|e| match e.split_once(':') {
            Some((k, _)) => format!("{}: {REDACTED}", k.trim()),
            None => REDACTED.to_owned(),
        })
        .collect();
    format!(
        "{}{{{}}}{}",
        &line[..open],
        entries.join(", "),
        &line[close + 1..]
    )
}

/// JSON string values of secret keys, base64-shaped values and every value
/// inside a `"data"`/`"stringData"` object, on one line (compact JSON, a
/// `jsonpath={.data}` map, a dockerconfigjson, a key file's line).
fn redact_json_strings(line: &str) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut depth = 0usize;
    let mut data_depth: Option<usize> = None;
    let mut i = 0;
    // Copied up to here.
    let mut copied = 0;
    let string_end = |from: usize| -> Option<usize> {
        let mut j = from + 1;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'"' => return Some(j),
                _ => j += 1,
            }
        }
        None
    };
    let skip_ws = |mut j: usize| {
        while j < b.len() && b[j] == b' ' {
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                if data_depth == Some(depth) {
                    data_depth = None;
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let Some(end) = string_end(i) else { break };
                let after = skip_ws(end + 1);
                if after < b.len() && b[after] == b':' {
                    let key = &line[i + 1..end];
                    let v = skip_ws(after + 1);
                    if v < b.len() && b[v] == b'"' {
                        let Some(vend) = string_end(v) else { break };
                        let value = &line[v + 1..vend];
                        if (data_depth.is_some()
                            || is_secret_key(key)
                            || looks_like_base64(value)
                            || value.contains("PRIVATE KEY"))
                            && value != REDACTED
                        {
                            out.push_str(&line[copied..v]);
                            out.push_str(QUOTED_REDACTED);
                            copied = vend + 1;
                        }
                        i = vend + 1;
                    } else {
                        if v < b.len() && b[v] == b'{' && matches!(key, "data" | "stringData") {
                            data_depth = Some(depth + 1);
                        }
                        i = v;
                    }
                } else {
                    if data_depth.is_some() && &line[i + 1..end] != REDACTED {
                        out.push_str(&line[copied..i]);
                        out.push_str(QUOTED_REDACTED);
                        copied = end + 1;
                    }
                    i = end + 1;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&line[copied..]);
    out
}

/// Base64 of some length, with the marks of encoded bytes (a digit, `+`,
/// `/` or padding, and both cases): `c2VjcmV0`, `YWRtaW4=`. Kubernetes
/// names, hex digests and plain words do not look like this.
fn looks_like_base64(value: &str) -> bool {
    value.len() >= 8
        && value.len().is_multiple_of(4)
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        && value
            .chars()
            .any(|c| c.is_ascii_digit() || matches!(c, '+' | '/' | '='))
        && value.chars().any(|c| c.is_ascii_uppercase())
        && value.chars().any(|c| c.is_ascii_lowercase())
        && !value.trim_end_matches('=').contains('=')
}

/// A line that is one base64 value, as `jsonpath={.data.password}` prints.
fn looks_like_bare_secret(word: &str) -> bool {
    word.len() >= 12 && looks_like_base64(word)
}

/// The first `key=value` or `key:value` in a word whose key is secret
/// (`password=x`, `"token":"x"`, `--from-literal=password=x`): where its
/// value starts, and the value. Keys run from the previous separator.
fn secret_assignment(word: &str) -> Option<(usize, &str)> {
    let mut from = 0;
    for (at, c) in word.char_indices() {
        if c == ',' {
            // `--set a=1,auth.password=x`: a list's next key.
            from = at + 1;
            continue;
        }
        if !matches!(c, '=' | ':') {
            continue;
        }
        // `\"key\":` too: JSON escaped inside a log line.
        let key = word[from..at]
            .trim_matches(|c| c == '"' || c == '\'' || c == '-' || c == '{' || c == '\\');
        if !key.contains('/') && is_secret_key(key) {
            return Some((at + 1, &word[at + 1..]));
        }
        from = at + 1;
        if word[from..].starts_with("//") {
            // A URL's scheme; its credentials are handled as such.
            return None;
        }
    }
    None
}

/// Words that make a key secret wherever they stand in it, as one of its
/// segments (`SECRET_KEY_BASE`, `AWS_ACCESS_KEY_ID`, `tls.key`, `sig`).
const SECRET_SEGMENTS: [&str; 9] = [
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "key",
    "sig",
    "signature",
    "credential",
];

/// A key's segments: split at `_`, `-`, `.` and lower-to-upper case
/// changes (`secretKeyBase` is `secret`, `key`, `base`), lower case.
fn segments(key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if matches!(c, '_' | '-' | '.') {
            out.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    out.push(cur);
    out.retain(|s| !s.is_empty());
    out
}

/// Whether `key` names a secret: it ends in one of [`SECRET_KEYS`]
/// (`DB_PASS`, `GITHUB_TOKEN`), or one of its segments is one of
/// [`SECRET_SEGMENTS`] (`STRIPE_KEY`, `SECRET_KEY_BASE`).
fn is_secret_key(key: &str) -> bool {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if plain
        && segments(key)
            .iter()
            .any(|s| SECRET_SEGMENTS.contains(&s.as_str()))
    {
        return true;
    }
    let folded: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-' && *c != '.')
        .flat_map(char::to_lowercase)
        .collect();
    !folded.is_empty()
        && folded.chars().all(|c| c.is_ascii_alphanumeric())
        && SECRET_KEYS.iter().any(|k| folded.ends_with(k))
}

/// Three base64url segments, the first starting `eyJ` (`{"` encoded).
fn looks_like_jwt(word: &str) -> bool {
    let word = word.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_');
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts.iter().all(|p| {
            p.len() >= 8
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}
