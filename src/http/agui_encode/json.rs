//! JSON helpers of the AG-UI encoder: JSON Pointer tokens, null stripping (AG-UI schemas reject
//! nulls), the JSON Patch diff behind STATE_DELTA, and ISO 8601 times for interrupt `expiresAt`.

use serde_json::{json, Value};

/// Escapes one JSON Pointer reference token (RFC 6901).
pub fn token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Drops null object members and array items, recursively (AG-UI schemas reject nulls).
pub fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => {
            a.retain(|x| !x.is_null());
            a.iter_mut().for_each(strip_nulls);
        }
        _ => {}
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for Unix ms (interrupt `expiresAt` is an ISO 8601 string).
pub fn iso8601(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, mi, s, milli) = (rem / 3_600_000, rem / 60_000 % 60, rem / 1000 % 60, rem % 1000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z")
}

/// JSON Patch ops turning `old` into `new`: members added or removed whole, objects compared member
/// by member, anything else replaced whole — so no op writes inside a value another op added.
pub fn diff(old: &Value, new: &Value, path: &mut String, ops: &mut Vec<Value>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, va) in a {
                let len = path.len();
                path.push('/');
                path.push_str(&token(k));
                match b.get(k) {
                    None => ops.push(json!({ "op": "remove", "path": path })),
                    Some(vb) if vb != va => diff(va, vb, path, ops),
                    Some(_) => {}
                }
                path.truncate(len);
            }
            for (k, vb) in b.iter().filter(|(k, _)| !a.contains_key(*k)) {
                ops.push(json!({ "op": "add", "path": format!("{path}/{}", token(k)), "value": vb }));
            }
        }
        _ if old != new => ops.push(json!({ "op": "replace", "path": path, "value": new })),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Applies the ops `diff` emits (add, remove, replace) the way RFC 6902 says.
    fn apply(doc: &mut Value, ops: &[Value]) {
        for op in ops {
            let path = op["path"].as_str().unwrap();
            let (parent, last) = path.rsplit_once('/').unwrap();
            let key = last.replace("~1", "/").replace("~0", "~");
            let target = if parent.is_empty() { &mut *doc } else { doc.pointer_mut(parent).unwrap() };
            let obj = target.as_object_mut().unwrap();
            match op["op"].as_str().unwrap() {
                "add" | "replace" => {
                    obj.insert(key, op["value"].clone());
                }
                "remove" => {
                    obj.remove(&key).unwrap();
                }
                other => panic!("{other}"),
            }
        }
    }

    #[test]
    fn diff_turns_old_into_new_without_writing_into_its_own_values() {
        let old = json!({ "a": 1, "b": { "c": [1], "d": "x" }, "gone": true, "s/l~": { "k": 1 } });
        let new = json!({ "a": 2, "b": { "c": [1, 2], "e": { "f": 1 } }, "s/l~": { "k": 1, "m": null }, "n": {} });
        let mut ops = Vec::new();
        diff(&old, &new, &mut String::new(), &mut ops);
        let mut doc = old.clone();
        apply(&mut doc, &ops);
        assert_eq!(doc, new);
        let paths: Vec<&str> = ops.iter().map(|o| o["path"].as_str().unwrap()).collect();
        for (i, p) in paths.iter().enumerate() {
            assert!(!paths[..i].iter().any(|q| p.starts_with(&format!("{q}/"))), "{p} writes inside an earlier op");
        }
        assert!(paths.contains(&"/s~1l~0/m"));
        let mut none = Vec::new();
        diff(&new, &new, &mut String::new(), &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn iso8601_and_nulls() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_800_000_000_123), "2027-01-15T08:00:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        let mut v = json!({ "a": null, "b": [1, null, { "c": null, "d": 2 }] });
        strip_nulls(&mut v);
        assert_eq!(v, json!({ "b": [1, { "d": 2 }] }));
    }
}
