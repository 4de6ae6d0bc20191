//! Names beside values: in JSON the word that says a value is a credential is often not in the
//! value's own string but beside it, as its key (`{"x-api-key": "opensesame"}`), as the
//! element before it in a header pair (`["Authorization", "Basic b3Blbg=="]`), or as the
//! `name` of the object whose `value` it is (`{"name": "Authorization", "value": "..."}`).
//! Redacting each string alone never sees that word, so a value that does not look random
//! would pass. These two questions are the one definition of "a name calls it a credential",
//! used wherever JSON is read string by string: the classifier's rule text (which leaves such
//! values out) and the server's live updates (which show them as `[redacted]`).

use serde_json::{Map, Value};

/// Whether the value of `key` in `object` is a credential by the name beside it: `key` names
/// one (`password`, `x-api-key`, `Authorization`), or `key` is `value` and the object's
/// `name`, `key` or `header` names one.
pub fn credential_member(object: &Map<String, Value>, key: &str) -> bool {
    super::is_credential_name(key)
        || key.eq_ignore_ascii_case("value")
            && object.iter().any(|(n, x)| {
                ["name", "key", "header"]
                    .iter()
                    .any(|k| n.eq_ignore_ascii_case(k))
                    && names_credential(x)
            })
}

/// Whether element `i` of `array` is a credential by the name before it: a string after a
/// credential's name in a list (a header pair, `["x-api-key", "..."]`).
pub fn credential_element(array: &[Value], i: usize) -> bool {
    i > 0 && array[i].is_string() && names_credential(&array[i - 1])
}

fn names_credential(v: &Value) -> bool {
    v.as_str().is_some_and(super::is_credential_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_key_a_header_pair_and_a_named_value_call_a_value_a_credential() {
        let o = json!({"x-api-key": "a", "Authorization": "b", "status": "c"});
        let o = o.as_object().unwrap();
        assert!(credential_member(o, "x-api-key"));
        assert!(credential_member(o, "Authorization"));
        assert!(!credential_member(o, "status"));
        let named = json!({"name": "X-Goog-Api-Key", "value": "a"});
        assert!(credential_member(named.as_object().unwrap(), "value"));
        let plain = json!({"name": "Accept", "value": "a"});
        assert!(!credential_member(plain.as_object().unwrap(), "value"));
        let pairs = json!([
            "Accept",
            "text/plain",
            "Authorization",
            "Basic b3Blbg==",
            "x",
            "y"
        ]);
        let a = pairs.as_array().unwrap();
        let named: Vec<usize> = (0..a.len()).filter(|&i| credential_element(a, i)).collect();
        assert_eq!(named, [3]);
    }
}
