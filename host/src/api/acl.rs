//! `/v1/acl/...`: Nomad's ACL bootstrap, token and policy endpoints, and the layer that
//! checks every request against its token when the ACL system is on (see [`crate::acl`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::routes::Routes;
use super::{ApiError, AppState, with_index};
use crate::acl::check::Need;
use crate::acl::routes::RouteArgs;
use crate::acl::store::{Caller, StoredPolicy, StoredToken, TokenSpec};
use crate::acl::{Acl, StoreError};

mod gate;

pub(crate) use gate::{enforce, events_allowed, secret_of};

pub(super) fn routes() -> Routes {
    // The ACL endpoints check their caller themselves.
    let own = |_: &RouteArgs<'_>| Need::AclApi;
    Routes::new()
        // Nomad's API client sends PUT.
        .on("POST PUT", "/v1/acl/bootstrap", bootstrap, own)
        .on("GET", "/v1/acl/tokens", list_tokens, own)
        .on("POST PUT", "/v1/acl/token", create_token, own)
        .on("POST PUT", "/v1/acl/token/onetime", one_time, own)
        .on("POST PUT", "/v1/acl/token/onetime/exchange", exchange, own)
        .on("GET", "/v1/acl/token/{accessor}", read_token, own)
        .on("POST PUT", "/v1/acl/token/{accessor}", update_token, own)
        .on("DELETE", "/v1/acl/token/{accessor}", delete_token, own)
        .on("GET", "/v1/acl/policies", list_policies, own)
        .on("GET", "/v1/acl/policy/{name}", read_policy, own)
        .on("POST PUT", "/v1/acl/policy/{name}", upsert_policy, own)
        .on("DELETE", "/v1/acl/policy/{name}", delete_policy, own)
}

/// Who made a request, as the layer resolved it.
#[derive(Clone)]
pub(crate) struct Who {
    caller: Caller,
    /// The secret the request carried (shown back only by `token/self`).
    secret: Option<String>,
    acl: Arc<Acl>,
}

impl Who {
    /// What the request's token may do.
    pub(crate) fn acl(&self) -> &Acl {
        &self.acl
    }

    /// This caller under the store's tokens and policies as they are now: `None` once its
    /// token is deleted or has expired. A stream checks its caller again with this, as
    /// Nomad's event broker does on each token and policy change.
    pub(crate) fn refreshed(&self, store: &crate::acl::AclStore) -> Option<Who> {
        let caller = match &self.caller {
            Caller::Token(t) => {
                let now = store.token(&t.accessor_id)?;
                if now.expiration_time != 0 && now.expiration_time <= crate::util::now_nanos() {
                    return None;
                }
                Caller::Token(now)
            }
            other => other.clone(),
        };
        Some(Who {
            acl: Arc::new(store.acl_of(&caller)),
            caller,
            secret: self.secret.clone(),
        })
    }
}

fn denied() -> ApiError {
    ApiError(StatusCode::FORBIDDEN, "Permission denied".into())
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let code = match &e {
            StoreError::AlreadyBootstrapped(_) | StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
            StoreError::TokenNotFound | StoreError::PolicyNotFound => StatusCode::NOT_FOUND,
            StoreError::State(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(code, e.to_string())
    }
}

fn enabled(agent: &AppState) -> Result<(), ApiError> {
    if agent.acl().enabled() {
        Ok(())
    } else {
        Err(ApiError::bad_request("ACL support disabled"))
    }
}

fn who(w: Option<Extension<Who>>) -> Result<Who, ApiError> {
    w.map(|Extension(w)| w).ok_or_else(denied)
}

fn management(w: &Who) -> Result<(), ApiError> {
    if w.acl.is_management() {
        Ok(())
    } else {
        Err(denied())
    }
}

/// A token in Nomad's wire shape; `secret` is shown only where Nomad's caller may see it
/// and this agent knows it (it keeps only a hash).
fn token_json(t: &StoredToken, secret: Option<&str>) -> Value {
    let mut v = stub_json(t);
    v["SecretID"] = json!(secret.unwrap_or(""));
    v
}

fn stub_json(t: &StoredToken) -> Value {
    let hash =
        base64::engine::general_purpose::STANDARD.encode(crate::acl::store::sha256(&format!(
            "{}|{}|{}|{}|{:?}",
            t.accessor_id, t.modify_index, t.name, t.kind, t.policies
        )));
    json!({
        "AccessorID": t.accessor_id,
        "Name": t.name,
        "Type": t.kind,
        "Policies": t.policies,
        "Roles": null,
        "Global": t.global,
        "Hash": hash,
        "CreateTime": crate::util::go_time(t.create_time),
        "ExpirationTime": (t.expiration_time != 0).then(|| crate::util::go_time(t.expiration_time)),
        "ExpirationTTL": t.expiration_ttl_ns,
        "CreateIndex": t.create_index,
        "ModifyIndex": t.modify_index,
    })
}

/// The config's `acl { token }` as `token/self` shows it: a management token whose
/// AccessorID is derived from the secret's hash.
fn configured_json(secret: &str) -> Value {
    let h = crate::acl::store::sha256(secret);
    let id = uuid::Builder::from_random_bytes(h[..16].try_into().expect("16 bytes")).into_uuid();
    json!({
        "AccessorID": id.to_string(), "SecretID": secret, "Name": "Configured Token",
        "Type": "management", "Policies": null, "Roles": null, "Global": false,
        "Hash": "", "CreateTime": crate::util::GO_ZERO_TIME, "ExpirationTime": null,
        "ExpirationTTL": 0, "CreateIndex": 0, "ModifyIndex": 0,
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct BootstrapBody {
    #[serde(rename = "BootstrapSecret")]
    bootstrap_secret: Option<String>,
}

/// `POST /v1/acl/bootstrap`: the first management token; a second call is a 400.
async fn bootstrap(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    enabled(&agent)?;
    let b: BootstrapBody = if body.iter().all(u8::is_ascii_whitespace) {
        BootstrapBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad_request(format!("invalid bootstrap request: {e}")))?
    };
    let (t, secret) = agent.acl().bootstrap(b.bootstrap_secret)?;
    tracing::info!(accessor = %t.accessor_id, "ACL system bootstrapped");
    Ok(with_index(t.modify_index, &token_json(&t, Some(&secret))))
}

async fn list_tokens(
    State(agent): State<AppState>,
    w: Option<Extension<Who>>,
    axum::extract::Query(lq): axum::extract::Query<super::listing::ListQuery>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    let lister = lq.lister()?;
    let list: Vec<Value> = agent.acl().tokens().iter().map(stub_json).collect();
    // By create index then accessor, as Nomad's paginator orders tokens.
    let page = lister.page(
        list,
        |t| {
            super::listing::Key::IndexId(
                t["CreateIndex"].as_u64().unwrap_or(0),
                t["AccessorID"].as_str().unwrap_or_default().to_string(),
            )
        },
        Clone::clone,
    )?;
    Ok(page.with_token(with_index(agent.acl().index(), &page.items)))
}

/// A token as a create or update body gives it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TokenBody {
    #[serde(rename = "AccessorID")]
    accessor_id: Option<String>,
    #[serde(rename = "Name")]
    name: Option<String>,
    #[serde(rename = "Type")]
    kind: Option<String>,
    #[serde(rename = "Policies")]
    policies: Option<Vec<String>>,
    #[serde(rename = "Global")]
    global: Option<bool>,
    #[serde(rename = "ExpirationTTL")]
    ttl: Option<Value>,
    #[serde(rename = "ExpirationTime")]
    expiration_time: Option<String>,
}

impl TokenBody {
    fn parse(body: &[u8]) -> Result<Self, ApiError> {
        serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid ACL token: {e}")))
    }

    fn spec(self) -> Result<TokenSpec, ApiError> {
        let ttl_ns = match &self.ttl {
            // `""` is what Nomad's clients send for "no TTL".
            None | Some(Value::Null) => 0,
            Some(Value::String(s)) if s.is_empty() => 0,
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| {
                ApiError::bad_request("ExpirationTTL: a duration in ns or like \"1h\"")
            })?,
            Some(Value::String(s)) => crate::util::parse_duration(s)
                .map(|d| d.as_nanos() as u64)
                .ok_or_else(|| {
                    ApiError::bad_request(format!("ExpirationTTL: {s:?} is no duration"))
                })?,
            Some(_) => return Err(ApiError::bad_request("ExpirationTTL: a duration")),
        };
        let expiration_time = match self.expiration_time.as_deref() {
            None | Some("") => 0,
            Some(s) => crate::util::parse_go_time(s).ok_or_else(|| {
                ApiError::bad_request(format!("ExpirationTime: {s:?} is not an RFC 3339 time"))
            })?,
        };
        Ok(TokenSpec {
            name: self.name.unwrap_or_default(),
            kind: self.kind.unwrap_or_else(|| "client".into()),
            policies: self.policies.unwrap_or_default(),
            global: self.global.unwrap_or(false),
            ttl_ns,
            expiration_time,
        })
    }
}

/// `POST /v1/acl/token`: a new token, SecretID shown once.
async fn create_token(
    State(agent): State<AppState>,
    w: Option<Extension<Who>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    let b = TokenBody::parse(&body)?;
    if b.accessor_id.as_deref().is_some_and(|a| !a.is_empty()) {
        return Err(ApiError::bad_request(
            "AccessorID must be empty when creating a token (update it at /v1/acl/token/{accessor})",
        ));
    }
    let (t, secret) = agent.acl().create_token(b.spec()?)?;
    tracing::info!(accessor = %t.accessor_id, name = %t.name, kind = %t.kind, "ACL token created");
    Ok(with_index(t.modify_index, &token_json(&t, Some(&secret))))
}

/// `PUT /v1/acl/token/onetime`: a one-time token standing for the caller's own token.
async fn one_time(
    State(agent): State<AppState>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    let w = who(w)?;
    let accessor = match &w.caller {
        Caller::Token(t) => t.accessor_id.clone(),
        Caller::Configured => {
            configured_json(w.secret.as_deref().unwrap_or_default())["AccessorID"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
        Caller::Anonymous => return Err(denied()),
    };
    let secret = w.secret.as_deref().ok_or_else(denied)?;
    let ott = agent.acl().issue_one_time(secret, &accessor);
    Ok(with_index(
        ott.index,
        &json!({
            "OneTimeToken": {
                "OneTimeSecretID": ott.one_time_secret_id,
                "AccessorID": ott.accessor_id,
                "ExpiresAt": crate::util::go_time(ott.expires_at),
                "CreateIndex": ott.index, "ModifyIndex": ott.index,
            },
            "Index": ott.index,
        }),
    ))
}

/// `PUT /v1/acl/token/onetime/exchange` `{"OneTimeSecretID"}`: the token it stands for,
/// with its secret, once.
async fn exchange(State(agent): State<AppState>, body: Bytes) -> Result<Response, ApiError> {
    enabled(&agent)?;
    #[derive(Deserialize)]
    struct Exchange {
        #[serde(rename = "OneTimeSecretID", default)]
        one_time_secret_id: String,
    }
    let b: Exchange = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    let (caller, secret, index) = agent
        .acl()
        .exchange_one_time(&b.one_time_secret_id)
        .ok_or_else(denied)?;
    let token = match &caller {
        Caller::Token(t) => token_json(t, Some(&secret)),
        _ => configured_json(&secret),
    };
    Ok(with_index(
        index,
        &json!({ "Token": token, "Index": index }),
    ))
}

/// `GET /v1/acl/token/{accessor}` (and `self`): a management token reads any token, a
/// client token its own.
async fn read_token(
    State(agent): State<AppState>,
    Path(accessor): Path<String>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    let w = who(w)?;
    let index = agent.acl().index();
    let own =
        |t: &StoredToken| matches!(&w.caller, Caller::Token(me) if me.accessor_id == t.accessor_id);
    if accessor == "self" {
        return match &w.caller {
            Caller::Token(t) => Ok(with_index(index, &token_json(t, w.secret.as_deref()))),
            Caller::Configured => Ok(with_index(
                index,
                &configured_json(w.secret.as_deref().unwrap_or_default()),
            )),
            Caller::Anonymous => Err(ApiError(
                StatusCode::NOT_FOUND,
                "ACL token not found".into(),
            )),
        };
    }
    let t = agent.acl().token(&accessor);
    match t {
        Some(t) if own(&t) => Ok(with_index(index, &token_json(&t, w.secret.as_deref()))),
        Some(t) if w.acl.is_management() => Ok(with_index(index, &token_json(&t, None))),
        None if w.acl.is_management() => Err(StoreError::TokenNotFound.into()),
        _ => Err(denied()),
    }
}

async fn update_token(
    State(agent): State<AppState>,
    Path(accessor): Path<String>,
    w: Option<Extension<Who>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    let b = TokenBody::parse(&body)?;
    if let Some(a) = b.accessor_id.as_deref().filter(|a| !a.is_empty())
        && a != accessor
    {
        return Err(ApiError::bad_request(format!(
            "AccessorID {a:?} does not match the path's {accessor:?}"
        )));
    }
    let t = agent.acl().update_token(&accessor, b.spec()?)?;
    Ok(with_index(t.modify_index, &token_json(&t, None)))
}

async fn delete_token(
    State(agent): State<AppState>,
    Path(accessor): Path<String>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    agent.acl().delete_token(&accessor)?;
    tracing::info!(accessor = %accessor, "ACL token deleted");
    Ok(with_index(agent.acl().index(), &Value::Null))
}

fn policy_json(p: &StoredPolicy, full: bool) -> Value {
    let mut v = json!({
        "Name": p.name, "Description": p.description,
        "CreateIndex": p.create_index, "ModifyIndex": p.modify_index,
    });
    if full {
        v["Rules"] = json!(p.rules);
        v["JobACL"] = Value::Null;
    }
    v
}

/// The policies a token may see: all for a management token, else its own.
fn may_see(w: &Who, name: &str) -> bool {
    w.acl.is_management()
        || match &w.caller {
            Caller::Token(t) => t.policies.iter().any(|p| p == name),
            Caller::Anonymous => name == "anonymous",
            Caller::Configured => true,
        }
}

async fn list_policies(
    State(agent): State<AppState>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    let w = who(w)?;
    let list: Vec<Value> = agent
        .acl()
        .policies()
        .iter()
        .filter(|p| may_see(&w, &p.name))
        .map(|p| policy_json(p, false))
        .collect();
    Ok(with_index(agent.acl().index(), &list))
}

async fn read_policy(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    let w = who(w)?;
    if !may_see(&w, &name) {
        return Err(denied());
    }
    let p = agent
        .acl()
        .policy(&name)
        .ok_or(StoreError::PolicyNotFound)?;
    Ok(with_index(agent.acl().index(), &policy_json(&p, true)))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PolicyBody {
    #[serde(rename = "Name")]
    name: Option<String>,
    #[serde(rename = "Description")]
    description: Option<String>,
    #[serde(rename = "Rules")]
    rules: Option<String>,
}

/// `POST /v1/acl/policy/{name}`: create or replace; rules that do not parse are a 400
/// naming what is wrong.
async fn upsert_policy(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    w: Option<Extension<Who>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    let b: PolicyBody = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request(format!("invalid ACL policy: {e}")))?;
    if let Some(n) = b.name.as_deref().filter(|n| !n.is_empty())
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "Policy name {n:?} does not match request path {name:?}"
        )));
    }
    agent.acl().upsert_policy(
        &name,
        b.description.unwrap_or_default(),
        b.rules.unwrap_or_default(),
    )?;
    tracing::info!(policy = %name, "ACL policy written");
    Ok((
        StatusCode::OK,
        [("X-Nomad-Index", agent.acl().index().to_string())],
    )
        .into_response())
}

async fn delete_policy(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    w: Option<Extension<Who>>,
) -> Result<Response, ApiError> {
    enabled(&agent)?;
    management(&who(w)?)?;
    agent.acl().delete_policy(&name)?;
    Ok((
        StatusCode::OK,
        [("X-Nomad-Index", agent.acl().index().to_string())],
    )
        .into_response())
}
