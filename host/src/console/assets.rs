//! The console's own stylesheet and script, embedded in the binary. Each is served under a name
//! carrying the first bytes of its SHA-256 (`console-<hash>.css`), so it can be cached for a
//! year and a new binary is fetched afresh; its `ETag` is that hash.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest as _, Sha256};

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The hashed names of the assets, as pages link them.
pub struct Urls {
    pub css: String,
    pub js: String,
    css_hash: String,
    js_hash: String,
}

fn short_hash(text: &str) -> String {
    hex::encode(&Sha256::digest(text.as_bytes())[..8])
}

static URLS: LazyLock<Urls> = LazyLock::new(|| {
    let css_hash = short_hash(CSS);
    let js_hash = short_hash(JS);
    Urls {
        css: format!("console-{css_hash}.css"),
        js: format!("console-{js_hash}.js"),
        css_hash,
        js_hash,
    }
});

/// The assets' names.
pub fn urls() -> &'static Urls {
    &URLS
}

/// `GET /console/assets/{name}`: only the current names; `If-None-Match` answers 304.
pub async fn serve(Path(name): Path<String>, headers: HeaderMap) -> Response {
    let urls = urls();
    let (body, hash, kind) = if name == urls.css {
        (CSS, &urls.css_hash, "text/css; charset=utf-8")
    } else if name == urls.js {
        (JS, &urls.js_hash, "text/javascript; charset=utf-8")
    } else {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    };
    let etag = format!("\"{hash}\"");
    let cached = [
        (header::ETAG, etag.clone()),
        (
            header::CACHE_CONTROL,
            "public, max-age=31536000, immutable".to_owned(),
        ),
    ];
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
    {
        return (StatusCode::NOT_MODIFIED, cached).into_response();
    }
    let mut response = (cached, body).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn assets_are_served_by_hashed_name_with_an_etag_and_a_304() {
        let urls = urls();
        assert_ne!(urls.css, urls.js);
        let answer = serve(Path(urls.css.clone()), HeaderMap::new()).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let etag = answer.headers()[header::ETAG].clone();
        assert!(
            answer.headers()[header::CACHE_CONTROL]
                .to_str()
                .is_ok_and(|v| v.contains("immutable"))
        );
        assert!(
            answer.headers()[header::CONTENT_TYPE]
                .to_str()
                .is_ok_and(|v| v.starts_with("text/css"))
        );
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let cached = serve(Path(urls.css.clone()), again).await;
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        // An old or unknown name is not served (a page always links the current hash).
        let stale = serve(
            Path("console-0000000000000000.css".to_owned()),
            HeaderMap::new(),
        )
        .await;
        assert_eq!(stale.status(), StatusCode::NOT_FOUND);
    }

    #[test]
    fn the_consoles_own_css_and_js_stay_small() {
        // Issue 22: a page's own JavaScript and CSS weigh at most 100 KB uncompressed.
        assert!(
            CSS.len() + JS.len() < 100 * 1024,
            "{} bytes",
            CSS.len() + JS.len()
        );
    }
}
