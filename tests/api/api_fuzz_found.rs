//! What schemathesis (`.ci/schemathesis`, issue 13) found against a live daemon, one test each:
//! every bad input is a 4xx envelope naming what is wrong, never a 5xx.

use crate::common;

use common::harness::Engine;
use serde_json::json;

const NOW: i64 = 1_700_000_000_000;

/// `POST /api/marketplaces {"url": ""}` answered 502 `fetch-failed` (reading the local file "" failed,
/// reported as a failed download). An empty URL is a 400 naming `url`; a local index that cannot be
/// read is a 422 `invalid-marketplace`; nothing is recorded.
#[test]
fn adding_a_marketplace_from_an_empty_or_unreadable_path_is_a_client_error() {
    let tmp = tempfile::tempdir().unwrap();
    let e = Engine::start(&tmp.path().join("data"), NOW);
    let (status, body) = e.post("/api/marketplaces", json!({ "url": "" }));
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("invalid-input")), "{body}");
    assert_eq!(body["error"]["data"]["field"], "url");
    for path in [tmp.path().join("missing.json"), tmp.path().to_path_buf()] {
        let (status, body) = e.post("/api/marketplaces", json!({ "url": path.to_str().unwrap() }));
        assert_eq!((status, body["error"]["code"].as_str()), (422, Some("invalid-marketplace")), "{body}");
    }
    let (status, body) = e.get("/api/marketplaces");
    assert_eq!((status, body["marketplaces"].as_array().map(Vec::len)), (200, Some(0)));
    e.stop();
}
