//! How a UI file is answered: the headers every UI response carries (a strict CSP, `nosniff`, no
//! referrer), revalidation by ETag (`Cache-Control: no-cache`, 304 on a matching
//! `If-None-Match`), and gzip when the request accepts it.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;

use super::assets::Asset;

/// The Content-Security-Policy of every UI response. Everything from the daemon itself: scripts
/// and styles only from files (no inline code, so an injected `<script>` or `style=` does
/// nothing), data:/blob: images (previews of image artifacts), blob: frames (HTML artifacts
/// shown in a sandboxed iframe), fetches and streams to the same origin only, never framed by
/// another site, no `<base>` rewriting, forms post only to the daemon, no plugins.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                       connect-src 'self'; frame-src 'self' blob:; frame-ancestors 'none'; base-uri 'none'; \
                       form-action 'self'; object-src 'none'";

/// Adds the headers every UI response carries (files, redirects, 404s).
pub fn secure(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    res
}

/// [`secure`] as a response layer (`axum::middleware::map_response` wants an async fn).
pub async fn secure_layer(res: Response) -> Response {
    secure(res)
}

/// A short plain-text answer (404, 400, 401 of the UI routes: not the API's JSON envelope).
pub fn plain(status: StatusCode, text: &str) -> Response {
    let mut res = Response::new(Body::from(format!("{text}\n")));
    *res.status_mut() = status;
    res.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// A 303 to `to`.
pub fn see_other(to: &'static str) -> Response {
    let mut res = plain(StatusCode::SEE_OTHER, to);
    res.headers_mut().insert(header::LOCATION, HeaderValue::from_static(to));
    res
}

/// Whether `Accept-Encoding` admits gzip (`gzip`, `x-gzip` or `*` with a non-zero q).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut star = None;
    for v in headers.get_all(header::ACCEPT_ENCODING) {
        for item in v.to_str().unwrap_or("").split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q=").or_else(|| p.trim().strip_prefix("Q=")))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match coding.as_str() {
                "gzip" | "x-gzip" => gzip = Some(q > 0.0),
                "*" => star = Some(q > 0.0),
                _ => {}
            }
        }
    }
    gzip.or(star).unwrap_or(false)
}

/// Whether `If-None-Match` names one of `tags` (weak comparison) or is `*`.
fn none_match(headers: &HeaderMap, tags: &[&str]) -> bool {
    headers.get_all(header::IF_NONE_MATCH).iter().any(|v| {
        v.to_str().unwrap_or("").split(',').map(str::trim).any(|t| {
            let t = t.strip_prefix("W/").unwrap_or(t);
            t == "*" || tags.contains(&t)
        })
    })
}

/// The answer for a file: 304 when the client's copy is current, else the bytes (gzipped when
/// accepted and smaller). Each encoding has its own ETag (`"<digest>"`, `"<digest>-gz"`).
pub fn file(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let gz = asset.gzipped().filter(|_| accepts_gzip(headers));
    let plain_tag = format!("\"{}\"", asset.digest());
    let gz_tag = format!("\"{}-gz\"", asset.digest());
    let tag = if gz.is_some() { &gz_tag } else { &plain_tag };
    let mut res = if none_match(headers, &[&plain_tag, &gz_tag]) {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let bytes = gz.unwrap_or(asset.bytes);
        let mut r = Response::new(Body::from(bytes));
        let h = r.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static(asset.media_type()));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        if gz.is_some() {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        r
    };
    let h = res.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_str(tag).expect("hex digest"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if asset.gzipped().is_some() {
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn accept_encoding_q_values() {
        let ae = |v: &str| accepts_gzip(&with(header::ACCEPT_ENCODING, v));
        assert!(ae("gzip, deflate, br"));
        assert!(ae("br;q=1.0, gzip;q=0.8"));
        assert!(ae("*"));
        assert!(!ae("gzip;q=0"));
        assert!(!ae("*;q=0.5, gzip;q=0"), "gzip named with q=0 wins over *");
        assert!(!ae("identity"));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }

    #[test]
    fn if_none_match_lists_and_weak_tags() {
        let h = with(header::IF_NONE_MATCH, "\"a\", W/\"b\"");
        assert!(none_match(&h, &["\"b\""]));
        assert!(!none_match(&h, &["\"c\""]));
        assert!(none_match(&with(header::IF_NONE_MATCH, "*"), &["\"c\""]));
    }
}
