//! The Kubernetes CEL environment on the rules Istio's CRDs declare.

use serde_json::json;

use super::{Cel, compile, context, error_text, to_cel};

fn eval(rule: &str, schema: serde_json::Value, v: serde_json::Value) -> Result<Cel, String> {
    let p = compile(rule)?;
    p.execute(&context(to_cel(&schema, &v)))
        .map_err(|e| error_text(&e))
}

#[test]
fn istio_rules_evaluate_as_kube_apiserver_does() {
    let s = json!({"type": "string"});
    let obj = json!({"type": "object"});
    let t = |r: &str, schema: &serde_json::Value, v: serde_json::Value| eval(r, schema.clone(), v);
    let yes = Ok(Cel::Bool(true));
    let no = Ok(Cel::Bool(false));
    assert_eq!(t("duration(self) >= duration('1ms')", &s, json!("10s")), yes);
    assert_eq!(t("duration(self) >= duration('1ms')", &s, json!("0.5ms")), no);
    assert_eq!(
        t("0 < self && self <= 65535", &json!({"type": "integer"}), json!(0)),
        no
    );
    assert_eq!(
        t(
            "self.all(key, 0 < int(key) && int(key) <= 65535)",
            &obj,
            json!({"80": {}})
        ),
        yes
    );
    assert_eq!(
        t(
            "self.all(key, 0 < int(key) && int(key) <= 65535)",
            &obj,
            json!({"abc": {}})
        ),
        Err("type conversion error from 'string' to 'int'".into())
    );
    assert_eq!(
        t(
            "self.all(l1, self.exists_one(l2, l1.number == l2.number))",
            &json!({"type": "array"}),
            json!([{"number": 80}, {"number": 80}])
        ),
        no
    );
    assert_eq!(
        t(
            "self.startsWith(\"unix://\") ? (self.substring(7, 8) == \"/\" || self.substring(7, 8) == \"@\") : true",
            &s,
            json!("unix://foo")
        ),
        no
    );
    assert_eq!(
        t(
            "url(self).getScheme() in [\"http\", \"https\"]",
            &s,
            json!("https://a.example/jwks")
        ),
        yes
    );
    assert!(
        t(
            "url(self).getScheme() in [\"http\", \"https\"]",
            &s,
            json!("hTPp\u{8}blah")
        )
        .is_err()
    );
    // Go's %q of the value, as kube-apiserver prints Istio's reqauth-invalid `invalid-jwks`.
    assert_eq!(
        t("url(self).getScheme() == 'http'", &s, json!("hTPp\\\u{8}lah")),
        Err("URL parse error during conversion from string: parse \"hTPp\\\\\\blah\": net/url: invalid control character in URL".into())
    );
    // Istio's wasm-invalid `#%blah$#@`: no scheme, and `http://` + it has a bad userinfo.
    assert_eq!(
        t("isURL(self) || isURL('http://' + self)", &s, json!("#%blah$#@")),
        no
    );
    assert_eq!(t("isURL('http://a/%zz')", &s, json!("")), no);
    assert_eq!(
        t("isURL('http://u:p@a.example:80/x%20y?q=1')", &s, json!("")),
        yes
    );
    assert_eq!(
        t(
            "isURL(self) ? (url(self).getScheme() in [\"\", \"http\", \"https\", \"file\", \"oci\"]) : (isURL(\"http://\" + self) && url(\"http://\" + self).getScheme() in [\"\", \"http\", \"https\", \"file\", \"oci\"])",
            &s,
            json!("ftp://x/y")
        ),
        no
    );
    assert_eq!(
        t(
            "isURL(self) ? (url(self).getScheme() in [\"\", \"http\", \"https\", \"file\", \"oci\"]) : (isURL(\"http://\" + self) && url(\"http://\" + self).getScheme() in [\"\", \"http\", \"https\", \"file\", \"oci\"])",
            &s,
            json!("ghcr.io/istio/wasm:1")
        ),
        yes
    );
    assert_eq!(
        t(
            "((has(self.operation) ? self.operation : \"\") == \"UPSERT\") ? (self.value != \"\") : true",
            &obj,
            json!({"operation": "UPSERT"})
        ),
        Err("no such key: value".into())
    );
    assert_eq!(
        t(
            "has(self.portLevelMtls) ? (((has(self.selector) && has(self.selector.matchLabels)) ? self.selector.matchLabels : {}).size() > 0) : true",
            &obj,
            json!({"portLevelMtls": {"80": {}}})
        ),
        no
    );
    assert_eq!(
        t(
            "self.all(key, size(key) < 63 && key.matches(\"^[a-zA-Z0-9](?:[-a-zA-Z0-9]*[a-zA-Z0-9])?$\"))",
            &obj,
            json!({"http-": 80})
        ),
        no
    );
    assert_eq!(
        t("isIP(self) && ip(self).family() == 4", &s, json!("1.2.3.4")),
        yes
    );
    assert_eq!(
        t(
            "isCIDR(self) && cidr(self).containsIP('10.0.0.1')",
            &s,
            json!("10.0.0.0/8")
        ),
        yes
    );
    assert_eq!(
        t(
            "'TacoCat'.lowerAscii() == 'tacocat' && 'a,b'.split(',').size() == 2",
            &s,
            json!("")
        ),
        yes
    );
}

#[test]
fn a_number_field_is_a_double_even_when_integral() {
    assert_eq!(
        eval("self == 1.0", json!({"type": "number"}), json!(1)),
        Ok(Cel::Bool(true))
    );
    assert_eq!(
        eval("self == 1", json!({"type": "integer"}), json!(1)),
        Ok(Cel::Bool(true))
    );
}

#[test]
fn rules_that_do_not_compile_say_why() {
    assert!(
        compile("self.size( < 3")
            .unwrap_err()
            .contains("ERROR: <input>:1:")
    );
    assert_eq!(
        compile("self.nosuch() == 1").unwrap_err(),
        "ERROR: <input>: undeclared reference to 'nosuch' (in container '')"
    );
}
