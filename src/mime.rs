//! A file's media type by its extension: the one table the asset chips of an apply and the
//! preview routes share. Unknown extensions have none (served as `application/octet-stream`).

/// The media type of `path`, without parameters; None for an extension not listed.
pub fn of(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase())?;
    Some(match ext.as_str() {
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "md" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        "woff2" => "font/woff2",
        _ => return None,
    })
}

/// The `Content-Type` to serve `path` with: text types in UTF-8, unknown ones as bytes.
pub fn content_type(path: &str) -> String {
    match of(path) {
        Some(t) if t.starts_with("text/") => format!("{t}; charset=utf-8"),
        Some(t) => t.to_string(),
        None => "application/octet-stream".to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn by_extension_case_blind() {
        assert_eq!(super::of("a/B.MD"), Some("text/markdown"));
        assert_eq!(super::of("x"), None);
        assert_eq!(super::content_type("i.html"), "text/html; charset=utf-8");
        assert_eq!(super::content_type("i.png"), "image/png");
        assert_eq!(super::content_type("i.bin"), "application/octet-stream");
    }
}
