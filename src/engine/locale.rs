//! Localized fields (spec §5 `title_i18n`, `description_i18n`, `useCase.query`): for a requested
//! locale, a field's text is chosen in the spec's order — the locale itself (`zh-CN`), its base
//! language (`zh`), `en`, the field's plain value, then the first non-empty translation. Fields are
//! localized in what od returns (listings, apply, surfaces); the manifest as stored, and so its
//! digest, never changes.

use serde_json::{Map, Value};

/// Fields whose value may itself be a `{locale: text}` object.
const LOCALIZABLE: &[&str] = &["title", "description", "query", "prompt", "label", "placeholder", "help"];

fn nonempty<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    m.iter().find(|(k, _)| k.eq_ignore_ascii_case(key)).and_then(|(_, v)| v.as_str()).filter(|s| !s.is_empty())
}

/// The text of `translations` for `locale`: the locale, its base language, `en`, then `plain`,
/// then the first non-empty translation.
pub fn pick(translations: &Map<String, Value>, locale: Option<&str>, plain: Option<&str>) -> Option<String> {
    let base = locale.and_then(|l| l.split(['-', '_']).next());
    locale
        .and_then(|l| nonempty(translations, l))
        .or_else(|| base.and_then(|b| nonempty(translations, b)))
        .or_else(|| nonempty(translations, "en"))
        .or(plain.filter(|p| !p.is_empty()))
        .or_else(|| translations.values().filter_map(Value::as_str).find(|s| !s.is_empty()))
        .map(str::to_string)
}

fn is_translation_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| {
        !m.is_empty()
            && m.iter().all(|(k, v)| {
                v.is_string() && k.len() <= 16 && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
    })
}

/// Localizes `v` in place, recursively: every `X_i18n` map sets `X`, and a localizable field whose
/// value is a translation map becomes its text. Without a locale, the plain values stay and only
/// maps are resolved (to `en`, else the first).
pub fn localize(v: &mut Value, locale: Option<&str>) {
    match v {
        Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in &keys {
                if let Some(base) = k.strip_suffix("_i18n") {
                    if let Some(tr) = m[k].as_object().cloned() {
                        let plain = m.get(base).and_then(Value::as_str).map(str::to_string);
                        if let Some(text) = pick(&tr, locale, plain.as_deref()) {
                            m.insert(base.to_string(), Value::String(text));
                        }
                    }
                }
            }
            for k in keys {
                let has_i18n = m.contains_key(&format!("{k}_i18n"));
                let Some(child) = m.get_mut(&k) else { continue };
                if LOCALIZABLE.contains(&k.as_str()) && !has_i18n && is_translation_map(child) {
                    let tr = child.as_object().cloned().unwrap_or_default();
                    if let Some(text) = pick(&tr, locale, None) {
                        *child = Value::String(text);
                    }
                } else if !k.ends_with("_i18n") {
                    localize(child, locale);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| localize(x, locale)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_spec_order_locale_base_en_plain_first() {
        let mut v = json!({ "title": "Warm Grain", "title_i18n": { "en": "Warm Grain (en)", "zh-CN": "暖色颗粒", "ko": "" },
                            "useCase": { "query": { "de": "Mach {{x}}", "fr": "Fais {{x}}" } },
                            "surfaces": [ { "prompt_i18n": { "zh": "选择" }, "prompt": "Pick" } ] });
        let mut zh = v.clone();
        localize(&mut zh, Some("zh-CN"));
        assert_eq!(zh["title"], "暖色颗粒");
        assert_eq!(zh["surfaces"][0]["prompt"], "选择", "base language");
        assert_eq!(zh["useCase"]["query"], "Mach {{x}}", "no en: the first");
        let mut ko = v.clone();
        localize(&mut ko, Some("ko-KR"));
        assert_eq!(ko["title"], "Warm Grain (en)", "an empty translation falls through to en");
        assert_eq!(ko["surfaces"][0]["prompt"], "Pick", "no en: the plain value");
        let mut fr = v.clone();
        localize(&mut fr, Some("FR"));
        assert_eq!(fr["useCase"]["query"], "Fais {{x}}", "case-insensitive");
        localize(&mut v, None);
        assert_eq!(v["title"], "Warm Grain (en)");
        assert!(v["title_i18n"].is_object(), "translations stay");
    }
}
