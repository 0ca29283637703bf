//! The route table: every (method, path) the API serves, registered in one place. Each area's
//! `routes()` adds its handlers here; the table both builds the axum router and lists the routes,
//! so `tests/api/openapi.rs` compares the served routes with `/api/openapi.json` without a second list.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{delete, get, on, post, put, MethodFilter};
use axum::Router;

use super::AppState;

/// A route as served: the method and the axum path (`{param}`, `{*rest}` for a tail).
pub type Route = (Method, &'static str);

/// Routes under construction: the router and the list of what it serves.
#[derive(Default)]
pub struct Routes {
    router: Router<AppState>,
    table: Vec<Route>,
}

macro_rules! method {
    ($name:ident, $method:ident, $routing:ident) => {
        pub fn $name<H, T>(mut self, path: &'static str, handler: H) -> Self
        where
            H: Handler<T, AppState>,
            T: 'static,
        {
            self.router = self.router.route(path, $routing(handler));
            self.table.push((Method::$method, path));
            self
        }
    };
}

impl Routes {
    pub fn new() -> Self {
        Self::default()
    }
    method!(get, GET, get);
    method!(post, POST, post);
    method!(put, PUT, put);
    method!(delete, DELETE, delete);

    /// A route with its own body limit (`body::limited`: axum's limit and the name a 413 reports).
    pub fn limited<H, T>(
        mut self,
        method: Method,
        path: &'static str,
        handler: H,
        name: &'static str,
        max: usize,
    ) -> Self
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        let filter = MethodFilter::try_from(method.clone()).expect("a method axum routes");
        self.router = self.router.route(path, super::body::limited(on(filter, handler), name, max));
        self.table.push((method, path));
        self
    }

    /// Both tables in one (axum panics on a (method, path) served twice).
    pub fn merge(mut self, other: Routes) -> Self {
        self.router = self.router.merge(other.router);
        self.table.extend(other.table);
        self
    }

    pub fn into_parts(self) -> (Router<AppState>, Vec<Route>) {
        (self.router, self.table)
    }
}
