//! The OpenAPI 3.1 document of the HTTP API, derived from the handlers' `#[utoipa::path]`
//! annotations and their types, built once and served at `GET /api/openapi.json`.
//!
//! Each area's file declares its operations beside its handlers (an `Api` type listing them);
//! this module merges them, adds what every operation shares (the bearer scheme, the error
//! envelope as the `default` response) and serves the result. `tests/api/openapi.rs` checks that the
//! document's (method, path) pairs are exactly the route table's (`table.rs`).

pub mod schemas;
mod work_schemas;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi};

use super::table::Routes;
use schemas::ErrorBody;

pub fn routes() -> Routes {
    Routes::new().get("/api/openapi.json", serve)
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "od",
        description = "OpenDesign's plugin and run engine: the daemon's HTTP API. Every error is \
                       `{\"error\":{\"code\",\"message\",\"data\"}}` (the `default` response).",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(serve),
    components(schemas(ErrorBody)),
    security(("bearer" = []), ()),
)]
struct Doc;

/// The document: the areas' operations merged, then what they share. Built once.
pub fn document() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut doc = Doc::openapi();
        for part in super::api_parts() {
            doc.merge(part);
        }
        doc.info.version = env!("CARGO_PKG_VERSION").to_string();
        Shared.modify(&mut doc);
        doc
    })
}

/// The document as served (JSON).
fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| document().to_json().expect("the document serializes"))
}

/// This document.
#[utoipa::path(get, path = "/api/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI 3.1 document of this API", content_type = "application/json",
        body = Object)))]
async fn serve() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], json()).into_response()
}

/// What every operation shares: the bearer scheme (needed on every `/api/*` route when the daemon
/// runs with `OD_API_TOKEN`; always accepted), and the error envelope for every status an operation
/// does not list itself.
struct Shared;

impl Modify for Shared {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`OD_API_TOKEN`, or the daemon's local token (its discovery file). Required on every \
                         `/api/*` request when the daemon runs with OD_API_TOKEN (a non-loopback bind needs it); \
                         a loopback daemon without it accepts requests without a token.",
                    ))
                    .build(),
            ),
        );
        let envelope = ResponseBuilder::new()
            .description("An error: `{\"error\":{\"code\",\"message\",\"data\"}}`")
            .content(
                "application/json",
                utoipa::openapi::ContentBuilder::new()
                    .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name("ErrorBody"))))
                    .build(),
            )
            .build();
        for item in doc.paths.paths.values_mut() {
            for op in [&mut item.get, &mut item.put, &mut item.post, &mut item.delete].into_iter().flatten() {
                op.responses.responses.entry("default".into()).or_insert_with(|| RefOr::T(envelope.clone()));
            }
        }
    }
}
