//! The HTTP side of paging (`crate::page`): the `limit` and `cursor` query parameters of any list
//! route, read beside the route's own query fields, refused with a 400 naming the field.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::Deserialize;

use super::error::ApiError;
use crate::page::{PageError, PageReq};

/// The raw paging parameters of a request (other query fields are ignored here).
#[derive(Debug, Default, Deserialize)]
struct Raw {
    limit: Option<String>,
    cursor: Option<String>,
}

/// `limit` / `cursor` of a list request, not yet tied to a list.
#[derive(Debug, Default, Clone)]
pub struct Paging {
    limit: Option<String>,
    cursor: Option<String>,
}

impl Paging {
    /// Decodes for the list whose cursors are tagged `scope`.
    pub fn req(&self, scope: &str) -> Result<PageReq, ApiError> {
        PageReq::parse(scope, self.limit.as_deref(), self.cursor.as_deref()).map_err(page_error)
    }
}

/// A bad `limit` / `cursor` as a 400 naming it.
pub fn page_error(e: PageError) -> ApiError {
    ApiError::bad_request(e.field(), e)
}

impl<S: Send + Sync> FromRequestParts<S> for Paging {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let q = parts.uri.query().unwrap_or("");
        let raw: Raw = serde_urlencoded::from_str(q).map_err(|e| ApiError::bad_request("query", e))?;
        Ok(Self { limit: raw.limit, cursor: raw.cursor })
    }
}
