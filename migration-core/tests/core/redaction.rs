//! Redaction of the shapes issue 35 found recorded as they were.

use migration_core::redact::{Redactor, redact};

/// Asserts that `text`, redacted, holds none of `secrets` and all of `kept`.
#[track_caller]
fn redacts(text: &str, secrets: &[&str], kept: &[&str]) {
    let out = redact(text).text;
    for secret in secrets {
        assert!(!out.contains(secret), "{secret:?} left in {out:?}");
    }
    for part in kept {
        assert!(out.contains(part), "{part:?} lost from {out:?}");
    }
}

#[test]
fn kubectls_unable_to_parse_error_loses_the_values_it_quotes() {
    redacts(
        r#"error: unable to parse "{\"stringData\":{\"password\":\"hunter2\"}}": yaml: did not find expected ',' or '}'"#,
        &["hunter2"],
        &["error: unable to parse", "yaml: did not find expected"],
    );
    redacts(
        r#"error: unable to parse "{\"data\":{\"db\":\"aHVudGVyMg==\"},\"x\":": unexpected end of JSON input"#,
        &["aHVudGVyMg=="],
        &["unexpected end of JSON input"],
    );
}

#[test]
fn escaped_json_inside_a_log_line_is_redacted() {
    redacts(
        r#"{"level":"error","msg":"request failed","body":"{\"user\":\"app\",\"password\":\"hunter2\"}"}"#,
        &["hunter2"],
        &[r#""level":"error""#, "request failed", "app"],
    );
    redacts(
        r#"2026-12-07T10:00:00Z ERROR sent {\"apiKey\":\"k-123456\",\"name\":\"x\"} upstream"#,
        &["k-123456"],
        &["ERROR sent", "upstream"],
    );
}

#[test]
fn a_helm_set_list_loses_each_secret_value_and_keeps_the_others() {
    redacts(
        "helm upgrade db ./c --set replicas=1,auth.password=hunter2 --set-string a=b,auth.rootPassword=s3cr3t",
        &["hunter2", "s3cr3t"],
        &["replicas=1", "a=b"],
    );
}

#[test]
fn curls_user_password_is_redacted_and_the_user_kept() {
    redacts(
        "curl -u admin:hunter2 https://x.example.com/api && curl --user=bob:s3cr3t x && kubectl --user ops get pods",
        &["hunter2", "s3cr3t"],
        &["admin:", "bob:", "--user ops"],
    );
}

#[test]
fn an_sql_password_literal_is_redacted() {
    redacts(
        "psql: ERROR: ALTER ROLE app WITH LOGIN PASSWORD 'hunter2 two';\nCREATE USER x IDENTIFIED BY 's3cr3t'; create user y password 'lower1'",
        &["hunter2", "two'", "s3cr3t", "lower1"],
        &[
            "ALTER ROLE app WITH LOGIN PASSWORD",
            "CREATE USER x IDENTIFIED BY",
        ],
    );
}

#[test]
fn key_and_secret_key_base_assignments_are_redacted() {
    redacts(
        "STRIPE_KEY=sk_live_abc SECRET_KEY_BASE=0123abcd AWS_ACCESS_KEY_ID=AKIAXYZ KEY=plainkey MONKEY=banana",
        &["sk_live_abc", "0123abcd", "AKIAXYZ", "plainkey"],
        &["MONKEY=banana", "STRIPE_KEY=", "SECRET_KEY_BASE="],
    );
    redacts("tls.key: LS0tLS1CRUdJTi", &["LS0tLS1CRUdJTi"], &["tls.key"]);
}

#[test]
fn a_jsonpath_data_map_is_redacted_whatever_its_keys_are_called() {
    redacts(
        r#"{"a":"YQ==","conn":"cG9zdGdyZXM6Ly9kYg==","user":"YWRtaW4="}"#,
        &["YQ==", "cG9zdGdyZXM6Ly9kYg==", "YWRtaW4="],
        &[r#""conn""#, r#""a""#],
    );
    // A map of plain words is not a Secret's data.
    let labels = r#"{"app":"web","tier":"backend"}"#;
    assert_eq!(redact(labels).text, labels);
}

#[test]
fn tokens_in_url_query_strings_are_redacted() {
    redacts(
        "GET https://api.example.com/v1/x?user=bob&access_token=abc123&page=2 failed; https://b.blob.core.windows.net/c?sv=2020&sig=ZmFrZQ%3D%3D",
        &["abc123", "ZmFrZQ%3D%3D"],
        &["user=bob", "page=2", "api.example.com/v1/x", "sv=2020"],
    );
}

#[test]
fn plain_failure_output_still_passes_unchanged() {
    for text in [
        r#"Error from server (NotFound): secrets "db" not found"#,
        r#"The Deployment "web" is invalid: spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}"#,
        "error: unable to recognize \"x.yaml\": no matches for kind \"Widget\"",
        r#"{"kind":"Status","status":"Failure","message":"configmaps \"x\" not found","code":404}"#,
    ] {
        assert_eq!(redact(text).text, text, "{text}");
    }
}

// The shapes issue 27 found recorded as they were, each redacted now (moved here from
// redact.rs, which kept its own copy of the helper above).

#[test]
fn a_secret_flag_followed_by_its_value_is_redacted() {
    redacts(
        "psql --password hunter2 --host db --token=t0ken",
        &["hunter2", "t0ken"],
        &["--host db", "--password"],
    );
}

#[test]
fn credentials_in_urls_are_redacted_and_the_host_kept() {
    redacts(
        "cloning https://admin:s3cr3t@git.example.com/x.git and https://ghp_abcdefghijklmnop1234@github.com/y failed",
        &["s3cr3t", "ghp_abcdefghijklmnop1234"],
        &["git.example.com/x.git", "github.com/y", "admin"],
    );
}

#[test]
fn a_jsonpath_data_map_and_a_bare_base64_value_are_redacted() {
    redacts(
        r#"{"password":"c2VjcmV0MTIz","user":"YWRtaW4="}"#,
        &["c2VjcmV0MTIz", "YWRtaW4="],
        &["\"user\""],
    );
    redacts(
        "c2VjcmV0UGFzc3dvcmQxMjM=\nexit 1",
        &["c2VjcmV0UGFzc3dvcmQxMjM="],
        &["exit 1"],
    );
}

#[test]
fn a_dockerconfigjson_is_redacted_in_both_of_its_forms() {
    redacts(
        r#"{"auths":{"registry.example.com":{"username":"robot","password":"pa55w0rd","auth":"cm9ib3Q6cGE1NXcwcmQ="}}}"#,
        &["pa55w0rd", "cm9ib3Q6cGE1NXcwcmQ="],
        &["registry.example.com"],
    );
    redacts(
        "  .dockerconfigjson: eyJhdXRocyI6eyJyZWdpc3RyeSI6e319fQ==",
        &["eyJhdXRocyI6eyJyZWdpc3RyeSI6e319fQ=="],
        &[".dockerconfigjson"],
    );
}

#[test]
fn a_service_account_key_file_loses_its_private_key() {
    redacts(
        "{\n  \"type\": \"service_account\",\n  \"private_key_id\": \"0123456789abcdef\",\n  \"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n\",\n  \"client_email\": \"sa@p.iam.gserviceaccount.com\"\n}",
        &["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "0123456789abcdef"],
        &["\"type\": \"service_account\""],
    );
}

#[test]
fn ini_assignments_with_spaces_are_redacted() {
    redacts(
        "[client]\nuser = app\npassword = hunter2\naws_secret_access_key=AbC/123+xyz",
        &["hunter2", "AbC/123+xyz"],
        &["user = app", "[client]"],
    );
}

#[test]
fn a_secret_key_inside_a_flag_value_is_redacted() {
    redacts(
        "error: failed: --from-literal=password=hunter2 --from-literal=user=app",
        &["hunter2"],
        &["user=app", "--from-literal=password="],
    );
}

#[test]
fn pass_token_and_auth_variables_are_redacted() {
    redacts(
        "DB_PASS=hunter2 GITHUB_TOKEN=ghp_x1 NPM_AUTH=bnBt MY_VAR=plain",
        &["hunter2", "ghp_x1", "bnBt"],
        &["MY_VAR=plain"],
    );
}

#[test]
fn yaml_block_and_flow_styles_are_redacted() {
    redacts(
        "stringData:\n  config.yaml: |\n    user: app\n    hunter2-on-its-own-line\n  other: x\nkind: Secret",
        &["hunter2-on-its-own-line", "user: app"],
        &["kind: Secret", "config.yaml"],
    );
    redacts(
        "password: |\n  hunter2\nnext: value",
        &["hunter2"],
        &["next: value"],
    );
    redacts(
        "data: {password: c2VjcmV0, user: YWRtaW4=}\nkind: Secret",
        &["c2VjcmV0", "YWRtaW4="],
        &["kind: Secret"],
    );
}

#[test]
fn a_secrets_values_are_redacted_line_by_line_when_its_data_line_came_earlier() {
    // The runner keeps a tail of the output; the `data:` line may have
    // scrolled out of it while the values have not. Redacting the stream
    // line by line, before the tail is cut, still knows they are values.
    let mut r = Redactor::default();
    let mut kept = Vec::new();
    for line in "kind: Secret\ndata:\n  password: c2VjcmV0\n  user: YWRtaW4=\nmetadata:\n  name: db"
        .split('\n')
    {
        kept.extend(r.line(line));
    }
    let tail = kept[2..].join("\n");
    assert!(
        !tail.contains("c2VjcmV0") && !tail.contains("YWRtaW4="),
        "{tail}"
    );
    assert!(tail.contains("name: db"), "{tail}");
    // And text redacted once is recorded with its count when read again.
    assert_eq!(redact(&tail).count, 2, "{tail}");
}

#[test]
fn a_secrets_yaml_data_values_are_redacted_and_its_other_fields_kept() {
    redacts(
        "apiVersion: v1\nkind: Secret\ndata:\n  password: c2VjcmV0\n  user: YWRtaW4=\nmetadata:\n  name: db\n",
        &["c2VjcmV0", "YWRtaW4="],
        &["  user: [redacted]", "  name: db"],
    );
}

#[test]
fn a_secrets_json_string_data_values_are_redacted() {
    redacts(
        "{\n  \"stringData\": {\n    \"token\": \"hunter2\",\n    \"x\": \"y\"\n  },\n  \"kind\": \"Secret\"\n}",
        &["hunter2", "\"y\""],
        &["\"kind\": \"Secret\""],
    );
}

#[test]
fn bearer_tokens_are_redacted() {
    redacts(
        "curl -H Authorization: Bearer abc.def-123 failed",
        &["abc.def-123"],
        &["failed"],
    );
}

#[test]
fn private_key_blocks_are_redacted_whole() {
    let out = redact(
        "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabcdef\n-----END RSA PRIVATE KEY-----\nafter",
    )
    .text;
    assert_eq!(out, "before\n[redacted] (private key)\nafter");
}

#[test]
fn password_style_assignments_are_redacted() {
    redacts(
        "connecting with password=s3cr3t DB_PASSWORD=x api_key: k1 user=bob",
        &["s3cr3t", "=x ", "k1"],
        &["user=bob"],
    );
}

#[test]
fn kubeconfig_credentials_are_redacted() {
    redacts(
        "users:\n- name: admin\n  user:\n    client-key-data: LS0tLS1CRUdJTg==\n    token: abcdef123456\n",
        &["LS0tLS1CRUdJTg==", "abcdef123456"],
        &["- name: admin"],
    );
}

#[test]
fn json_web_tokens_are_redacted_wherever_they_appear() {
    let jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW0ifQ.c2lnbmF0dXJlc2ln";
    let out = redact(&format!("got {jwt} back")).text;
    assert_eq!(out, "got [redacted] back");
}

#[test]
fn ordinary_failure_output_is_left_as_it_is() {
    let text = "Error from server (NotFound): configmaps \"x\" not found\nexit status 1";
    let r = redact(text);
    assert_eq!(r.text, text);
    assert_eq!(r.count, 0);
}
