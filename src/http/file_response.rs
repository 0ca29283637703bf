//! How every file route answers (project files, a run's recorded files, exports, plugin preview
//! assets): one helper, so each sends the same headers — its type, `X-Content-Type-Options:
//! nosniff` (a browser never guesses HTML or script from the bytes), and a `Content-Disposition`:
//! `attachment` for raw downloads (opened directly, an artifact is saved, never rendered as the
//! daemon's own page), `inline` where the UI previews it (a plugin's preview assets, framed under
//! their own CSP) — naming the file (RFC 6266: an ASCII `filename` and a UTF-8 `filename*`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// How a browser should treat a file it opens directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Save it (raw downloads, exports).
    Attachment,
    /// Show it in place (preview assets the UI frames).
    Inline,
}

/// The `Content-Disposition` value for a file whose path or name is `name` (its last segment).
pub fn disposition(kind: Disposition, name: &str) -> String {
    let base = name.rsplit('/').next().unwrap_or(name);
    let ascii: String =
        base.chars().map(|c| if c.is_ascii_graphic() && !matches!(c, '"' | '\\' | '%') { c } else { '_' }).collect();
    let encoded: String = base
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let kind = match kind {
        Disposition::Attachment => "attachment",
        Disposition::Inline => "inline",
    };
    if ascii.is_empty() {
        return kind.to_string();
    }
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// Adds the file headers to `res`: `nosniff` and the disposition for `name`.
pub fn with_file_headers(mut res: Response, kind: Disposition, name: &str) -> Response {
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(v) = HeaderValue::from_str(&disposition(kind, name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    res
}

/// A file's bytes as a response of `content_type`, with the file headers.
pub fn file(bytes: Vec<u8>, content_type: &str, kind: Disposition, name: &str) -> Response {
    let mut res = (StatusCode::OK, bytes).into_response();
    if let Ok(v) = HeaderValue::from_str(content_type) {
        res.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    with_file_headers(res, kind, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_safely_and_kept_in_utf8() {
        assert_eq!(
            disposition(Disposition::Attachment, "site/index.html"),
            "attachment; filename=\"index.html\"; filename*=UTF-8''index.html"
        );
        assert_eq!(
            disposition(Disposition::Inline, "a \"b\"\r\n.html"),
            "inline; filename=\"a__b___.html\"; filename*=UTF-8''a%20%22b%22%0D%0A.html"
        );
        assert_eq!(
            disposition(Disposition::Attachment, "é.txt"),
            "attachment; filename=\"_.txt\"; filename*=UTF-8''%C3%A9.txt"
        );
        assert_eq!(disposition(Disposition::Attachment, ""), "attachment");
    }
}
