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
//! key such as kubeconfig's `client-key-data` or `token`). It errs towards
//! redacting: the tail is there to explain a failure, not to carry values.

/// What replaces a redacted value.
pub const REDACTED: &str = "[redacted]";

/// Text after redaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted {
    /// The text with secret-shaped values replaced by [`REDACTED`].
    pub text: String,
    /// How many values were replaced.
    pub count: usize,
}

/// Key names (lower case, `_` and `-` ignored) whose values are secrets.
const SECRET_KEYS: [&str; 12] = [
    "password",
    "passwd",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "clientkeydata",
    "clientsecret",
    "authorization",
    "credentials",
];

/// Redacts secret-shaped values in `text`.
pub fn redact(text: &str) -> Redacted {
    let mut out = Vec::new();
    let mut count = 0;
    // Indentation of a `data:`/`stringData:` YAML key whose children are
    // being redacted, or `Some(usize::MAX)` inside a JSON `"data": {`.
    let mut secret_map: Option<usize> = None;
    let mut in_pem = false;
    for line in text.split('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if in_pem {
            if trimmed.starts_with("-----END") {
                in_pem = false;
            }
            continue;
        }
        if trimmed.starts_with("-----BEGIN") && trimmed.contains("PRIVATE KEY") {
            out.push(format!("{}{REDACTED} (private key)", &line[..indent]));
            count += 1;
            in_pem = !trimmed.contains("-----END");
            continue;
        }
        if let Some(open) = secret_map {
            let json = open == usize::MAX;
            let ends = if json {
                trimmed.starts_with('}')
            } else {
                !trimmed.is_empty() && indent <= open
            };
            if ends {
                secret_map = None;
            } else if !trimmed.is_empty() {
                let (redacted_line, n) = redact_value(line);
                out.push(redacted_line);
                count += n;
                continue;
            }
        }
        if let Some(json) = opens_secret_map(trimmed) {
            secret_map = Some(if json { usize::MAX } else { indent });
        }
        let (line, n) = redact_inline(line);
        out.push(line);
        count += n;
    }
    Redacted {
        text: out.join("\n"),
        count,
    }
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

/// Replaces the value of a `key: value` or `"key": "value"` line.
fn redact_value(line: &str) -> (String, usize) {
    match line.find(':') {
        Some(colon) if !line[colon + 1..].trim().is_empty() => {
            let comma = if line.trim_end().ends_with(',') {
                ","
            } else {
                ""
            };
            (format!("{}: {REDACTED}{comma}", &line[..colon]), 1)
        }
        _ => (line.to_owned(), 0),
    }
}

/// Redacts secrets inside an ordinary line: `Bearer` tokens, JSON Web
/// Tokens and `key=value` / `key: value` pairs with a secret-sounding key.
fn redact_inline(line: &str) -> (String, usize) {
    let mut count = 0;
    let mut words: Vec<String> = Vec::new();
    let mut redact_next = false;
    for word in line.split(' ') {
        // `Authorization: Bearer <token>`: the scheme stays, the token goes.
        if word.eq_ignore_ascii_case("bearer") || word.eq_ignore_ascii_case("basic") {
            redact_next = true;
            words.push(word.to_owned());
            continue;
        }
        if redact_next && !word.is_empty() {
            words.push(REDACTED.to_owned());
            count += 1;
            redact_next = false;
            continue;
        }
        if let Some((key, sep, value)) = split_assignment(word)
            && is_secret_key(key)
        {
            if value.is_empty() {
                // `password: value` with the value in the next word.
                redact_next = sep == ':';
                words.push(word.to_owned());
            } else {
                words.push(format!("{key}{sep}{REDACTED}"));
                count += 1;
            }
            continue;
        }
        if looks_like_jwt(word) {
            words.push(REDACTED.to_owned());
            count += 1;
            continue;
        }
        words.push(word.to_owned());
    }
    (words.join(" "), count)
}

/// Splits `key=value`, `key:value` or `"key":"value"` (quotes kept out of
/// the key).
fn split_assignment(word: &str) -> Option<(&str, char, &str)> {
    let at = word.find(['=', ':'])?;
    let sep = word[at..].chars().next()?;
    let key = word[..at].trim_matches(|c| c == '"' || c == '\'' || c == '-' || c == '{');
    if key.is_empty() || key.contains('/') {
        return None;
    }
    Some((key, sep, &word[at + 1..]))
}

fn is_secret_key(key: &str) -> bool {
    let folded: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-' && *c != '.')
        .flat_map(char::to_lowercase)
        .collect();
    SECRET_KEYS.iter().any(|k| folded.ends_with(k))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(text: &str) -> String {
        redact(text).text
    }

    /// Asserts that `text`, cleaned, has none of `gone` and all of `kept`.
    #[track_caller]
    fn assert_redacted(text: &str, gone: &[&str], kept: &[&str]) {
        let out = clean(text);
        for secret in gone {
            assert!(!out.contains(secret), "{secret:?} left in {out}");
        }
        for part in kept {
            assert!(out.contains(part), "{part:?} lost from {out}");
        }
    }

    #[test]
    fn a_secrets_yaml_data_values_are_redacted_and_its_other_fields_kept() {
        assert_redacted(
            "apiVersion: v1\nkind: Secret\ndata:\n  password: c2VjcmV0\n  user: YWRtaW4=\nmetadata:\n  name: db\n",
            &["c2VjcmV0", "YWRtaW4="],
            &["  user: [redacted]", "  name: db"],
        );
    }

    #[test]
    fn a_secrets_json_string_data_values_are_redacted() {
        assert_redacted(
            "{\n  \"stringData\": {\n    \"token\": \"hunter2\",\n    \"x\": \"y\"\n  },\n  \"kind\": \"Secret\"\n}",
            &["hunter2", "\"y\""],
            &["\"kind\": \"Secret\""],
        );
    }

    #[test]
    fn bearer_tokens_are_redacted() {
        assert_redacted(
            "curl -H Authorization: Bearer abc.def-123 failed",
            &["abc.def-123"],
            &["failed"],
        );
    }

    #[test]
    fn private_key_blocks_are_redacted_whole() {
        let out = clean(
            "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabcdef\n-----END RSA PRIVATE KEY-----\nafter",
        );
        assert_eq!(out, "before\n[redacted] (private key)\nafter");
    }

    #[test]
    fn password_style_assignments_are_redacted() {
        assert_redacted(
            "connecting with password=s3cr3t DB_PASSWORD=x api_key: k1 user=bob",
            &["s3cr3t", "=x ", "k1"],
            &["user=bob"],
        );
    }

    #[test]
    fn kubeconfig_credentials_are_redacted() {
        assert_redacted(
            "users:\n- name: admin\n  user:\n    client-key-data: LS0tLS1CRUdJTg==\n    token: abcdef123456\n",
            &["LS0tLS1CRUdJTg==", "abcdef123456"],
            &["- name: admin"],
        );
    }

    #[test]
    fn json_web_tokens_are_redacted_wherever_they_appear() {
        let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlc2ln";
        let out = clean(&format!("got {jwt} back"));
        assert_eq!(out, "got [redacted] back");
    }

    #[test]
    fn ordinary_failure_output_is_left_as_it_is() {
        let text = "Error from server (NotFound): configmaps \"x\" not found\nexit status 1";
        let r = redact(text);
        assert_eq!(r.text, text);
        assert_eq!(r.count, 0);
    }
}
