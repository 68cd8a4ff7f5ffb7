//! Nomad-native service discovery (`command/agent/service_registration_endpoint.go`,
//! `nomad/service_registration_endpoint.go`): `/v1/services` (per namespace, each service
//! name with its tags), `/v1/service/{name}` (its registrations; `?choose=N|key` for a
//! stable subset, Nomad's `filter` and paging, `?tag=` to keep those carrying a tag),
//! `DELETE /v1/service/{name}/{id}`, and `/v1/allocation/{id}/services`.
//!
//! ACL as Nomad checks them: reading needs `read-job` in the namespace (a `*` list shows
//! the namespaces that grant it), deleting `submit-job` or `delete-service-registration`.

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;

use super::listing::{Key, ListQuery, Sees};
use super::routes::Routes;
use super::{ApiError, AppState, QueryOptions, with_index};
use crate::acl::check::{Need, NsFrom, READ_JOB};
use crate::structs::ServiceRegistration;

pub(super) fn routes() -> Routes {
    Routes::new()
        .on("GET", "/v1/services", list, |_| {
            Need::Ns(READ_JOB, NsFrom::List)
        })
        .on("GET", "/v1/service/{name}", read, |_| {
            Need::Ns(READ_JOB, NsFrom::Query)
        })
        .on("DELETE", "/v1/service/{name}/{id}", delete, |_| {
            Need::Ns(
                &["submit-job", "delete-service-registration"],
                NsFrom::Query,
            )
        })
        .on("GET", "/v1/allocation/{id}/services", of_alloc, |a| {
            Need::Ns(READ_JOB, NsFrom::Alloc(a.param("id")))
        })
}

/// `GET /v1/services`: the query's namespace (`default` when none is given, as Nomad's),
/// or every namespace the token may read with `*`.
async fn list(
    State(agent): State<AppState>,
    Query(q): Query<QueryOptions>,
    w: Option<axum::Extension<super::acl::Who>>,
) -> Response {
    let index = q.block(&agent).await;
    let sees = Sees::of(w.as_ref().map(|w| w.acl()));
    let ns = q.namespace();
    let mut list = agent
        .server()
        .service_list(|n| (ns == "*" || n == ns) && sees.namespace(n, READ_JOB));
    // `?prefix=` keeps the service names it begins (how `nomad service info` finds one).
    if let Some(p) = q.prefix.as_deref().filter(|p| !p.is_empty()) {
        for n in &mut list {
            n.services.retain(|s| s.service_name.starts_with(p));
        }
        list.retain(|n| !n.services.is_empty());
    }
    with_index(index, &list)
}

#[derive(Debug, Default, Deserialize)]
struct ServiceQuery {
    /// `N|key`: N registrations chosen by rendezvous hashing with `key`.
    #[serde(default)]
    choose: Option<String>,
    /// Keep the registrations that carry this tag.
    #[serde(default)]
    tag: Option<String>,
}

/// `GET /v1/service/{name}`: its registrations in the query's namespace, ordered by
/// `Namespace.ID` as Nomad's paginator orders them.
async fn read(
    State(agent): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<QueryOptions>,
    Query(sq): Query<ServiceQuery>,
    Query(lq): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let lister = lq.lister()?;
    let index = q.block(&agent).await;
    let ns = q.namespace();
    let regs: Vec<ServiceRegistration> = agent
        .server()
        .service(&ns, &name)
        .into_iter()
        .filter(|s| sq.tag.as_ref().is_none_or(|t| s.tags.contains(t)))
        .collect();
    let page = lister.page(
        regs,
        |s| Key::namespaced(&s.namespace, &s.id),
        |s| serde_json::to_value(s).unwrap_or_default(),
    )?;
    let items = match &sq.choose {
        Some(c) => crate::structs::service::choose(page.items.clone(), c)
            .map_err(|e| ApiError::bad_request(format!("failed to choose services: {e}")))?,
        None => page.items.clone(),
    };
    Ok(page.with_token(with_index(index, &items)))
}

/// `DELETE /v1/service/{name}/{id}`: remove a registration of the query's namespace.
async fn delete(
    State(agent): State<AppState>,
    Path((_name, id)): Path<(String, String)>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = agent
        .server()
        .delete_service(&q.namespace(), &id)
        .ok_or_else(|| ApiError::not_found(format!("service registration {id:?} not found")))?;
    Ok(super::empty_with_index(index))
}

/// `GET /v1/allocation/{id}/services`: an allocation's registrations (none while its
/// services are not up), a 404 for an unknown allocation.
async fn of_alloc(
    State(agent): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<QueryOptions>,
) -> Result<Response, ApiError> {
    let index = q.block(&agent).await;
    if agent.allocation(&id).is_none() {
        return Err(ApiError::not_found("alloc not found"));
    }
    Ok(with_index(index, &agent.server().alloc_services(&id)))
}
