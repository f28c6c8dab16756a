//! The Iceberg REST catalog protocol: the server keeps the table's metadata; a writer
//! loads it, and commits a snapshot as updates (`add-snapshot`, `set-snapshot-ref`) under
//! requirements (the table's uuid, the main branch still at the snapshot the commit
//! builds on), which the server checks and applies atomically.

use reqwest::{Method, StatusCode};
use serde_json::{Value as Json, json};
use tokio::sync::OnceCell;

use crate::iceberg::IcebergError;
use crate::iceberg::metadata::TableMetadata;
use crate::url::percent_encode;

/// How a writer proves who it is to a REST catalog.
#[derive(Debug, Clone)]
pub enum RestAuth {
    /// Not at all.
    None,
    /// A bearer token (`token`).
    Token(String),
    /// OAuth2 client credentials (`credential` = `client_id:client_secret`) exchanged for
    /// a bearer token at `oauth2-server-uri` (the catalog's `/v1/oauth/tokens` by
    /// default), for `scope`; exchanged again when the catalog says the token expired.
    Credential {
        /// The client id.
        id: String,
        /// The client secret.
        secret: String,
        /// The token endpoint, if not the catalog's.
        server: Option<String>,
        /// The scope asked for.
        scope: String,
    },
}

/// A table in a REST catalog.
#[derive(Debug, Clone)]
pub struct RestCatalog {
    /// The server's base URI (`http://host:port`, without `/v1`).
    uri: String,
    /// `warehouse`, passed to the server's configuration endpoint.
    warehouse: Option<String>,
    auth: RestAuth,
    /// The token client credentials were last exchanged for.
    access: std::sync::Arc<tokio::sync::Mutex<Option<String>>>,
    /// The table's namespace (levels separated by dots).
    pub namespace: String,
    /// The table's name.
    pub table: String,
    /// The path prefix the server's configuration names, asked for once.
    prefix: OnceCell<String>,
    client: reqwest::Client,
}

/// A table as a REST catalog answers it.
pub struct RestTable {
    /// The metadata file the server wrote.
    pub location: String,
    /// Its contents.
    pub metadata: TableMetadata,
}

impl RestCatalog {
    /// Table `namespace.table` of the catalog at `uri`.
    pub fn new(
        uri: &str,
        warehouse: Option<String>,
        auth: RestAuth,
        namespace: String,
        table: String,
    ) -> Self {
        RestCatalog {
            uri: uri.trim_end_matches('/').to_string(),
            warehouse,
            auth,
            access: Default::default(),
            namespace,
            table,
            prefix: OnceCell::new(),
            client: reqwest::Client::new(),
        }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<Json>,
    ) -> Result<(StatusCode, Json), IcebergError> {
        let url = format!("{}/v1/{path}", self.uri);
        let mut renewed = false;
        loop {
            let mut request = self.client.request(method.clone(), &url);
            if let Some(token) = self.bearer(renewed).await? {
                request = request.bearer_auth(token);
            }
            if let Some(body) = &body {
                request = request.json(body);
            }
            let response = request.send().await.map_err(|e| IcebergError::Catalog {
                message: format!("{url}: {e}"),
                transient: true,
            })?;
            let status = response.status();
            let expired = matches!(status.as_u16(), 401 | 419);
            if expired && !renewed && matches!(self.auth, RestAuth::Credential { .. }) {
                renewed = true;
                continue;
            }
            let text = response.text().await.unwrap_or_default();
            let body = serde_json::from_str(&text).unwrap_or(Json::String(text));
            return Ok((status, body));
        }
    }

    /// The bearer token to send, exchanging the client credentials for one when there is
    /// none yet or `renew` says the last expired.
    async fn bearer(&self, renew: bool) -> Result<Option<String>, IcebergError> {
        let (id, secret, server, scope) = match &self.auth {
            RestAuth::None => return Ok(None),
            RestAuth::Token(token) => return Ok(Some(token.clone())),
            RestAuth::Credential {
                id,
                secret,
                server,
                scope,
            } => (id, secret, server, scope),
        };
        let mut access = self.access.lock().await;
        if let (Some(token), false) = (access.as_ref(), renew) {
            return Ok(Some(token.clone()));
        }
        let endpoint = server
            .clone()
            .unwrap_or_else(|| format!("{}/v1/oauth/tokens", self.uri));
        let form = format!(
            "grant_type=client_credentials&client_id={}&client_secret={}&scope={}",
            percent_encode(id),
            percent_encode(secret),
            percent_encode(scope)
        );
        let response = self
            .client
            .post(&endpoint)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .map_err(|e| IcebergError::Catalog {
                message: format!("{endpoint}: {e}"),
                transient: true,
            })?;
        let status = response.status();
        let answer: Json = response.json().await.unwrap_or_default();
        let token = answer.get("access_token").and_then(Json::as_str);
        match (status.is_success(), token) {
            (true, Some(token)) => {
                *access = Some(token.to_string());
                Ok(Some(token.to_string()))
            }
            _ => {
                let message = answer
                    .get("error_description")
                    .or_else(|| answer.get("error"))
                    .map_or_else(|| answer.to_string(), Json::to_string);
                Err(IcebergError::Catalog {
                    message: format!("exchanging the client credentials ({status}): {message}"),
                    transient: status.is_server_error(),
                })
            }
        }
    }

    /// The error an unexpected answer is: transient for 5xx, 429 and 419 (an expired
    /// token), the server's message either way.
    fn refused(&self, doing: &str, status: StatusCode, body: &Json) -> IcebergError {
        let message = body
            .pointer("/error/message")
            .and_then(Json::as_str)
            .map_or_else(|| body.to_string(), str::to_string);
        IcebergError::Catalog {
            message: format!("{doing} ({status}): {message}"),
            transient: status.is_server_error()
                || status == StatusCode::TOO_MANY_REQUESTS
                || status.as_u16() == 419,
        }
    }

    /// `{prefix}/namespaces/{namespace}`, the prefix from the server's configuration.
    async fn namespace_path(&self) -> Result<String, IcebergError> {
        let prefix = self
            .prefix
            .get_or_try_init(|| async {
                let path = match &self.warehouse {
                    Some(warehouse) => format!("config?warehouse={}", percent_encode(warehouse)),
                    None => "config".to_string(),
                };
                let (status, body) = self.request(Method::GET, &path, None).await?;
                if !status.is_success() {
                    return Err(self.refused("reading the catalog's configuration", status, &body));
                }
                let prefix = body.pointer("/overrides/prefix").and_then(Json::as_str);
                Ok(prefix.map_or_else(String::new, |p| format!("{}/", percent_encode(p))))
            })
            .await?;
        let levels: Vec<String> = self.namespace.split('.').map(percent_encode).collect();
        Ok(format!("{prefix}namespaces/{}", levels.join("%1F")))
    }

    async fn table_path(&self) -> Result<String, IcebergError> {
        Ok(format!(
            "{}/tables/{}",
            self.namespace_path().await?,
            percent_encode(&self.table)
        ))
    }

    /// The table, `None` when the catalog lacks it.
    pub async fn load(&self) -> Result<Option<RestTable>, IcebergError> {
        let path = self.table_path().await?;
        let (status, body) = self.request(Method::GET, &path, None).await?;
        match status {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => self.table(&body).map(Some),
            status => Err(self.refused("loading the table", status, &body)),
        }
    }

    /// Creates the table (and its namespace when missing) with `schema` and `spec` (an
    /// Iceberg schema's and partition spec's JSON); `None` when another writer created it
    /// first.
    pub async fn create(
        &self,
        schema: Json,
        spec: Json,
    ) -> Result<Option<RestTable>, IcebergError> {
        let namespace = self.namespace_path().await?;
        let (collection, _) = namespace.rsplit_once('/').unwrap_or(("", ""));
        let levels: Vec<&str> = self.namespace.split('.').collect();
        let body = json!({"namespace": levels, "properties": {}});
        let (status, answer) = self.request(Method::POST, collection, Some(body)).await?;
        if !status.is_success() && status != StatusCode::CONFLICT {
            return Err(self.refused("creating the namespace", status, &answer));
        }
        let body = json!({
            "name": self.table,
            "schema": schema,
            "partition-spec": spec,
            "properties": {"format-version": "2"},
        });
        let path = format!("{namespace}/tables");
        let (status, answer) = self.request(Method::POST, &path, Some(body)).await?;
        match status {
            StatusCode::CONFLICT => Ok(None),
            status if status.is_success() => self.table(&answer).map(Some),
            status => Err(self.refused("creating the table", status, &answer)),
        }
    }

    /// Adds `snapshot` to the table and makes it the main branch's, if the branch is still
    /// at `base`'s current snapshot; false when another writer committed first.
    pub async fn commit(&self, base: &TableMetadata, snapshot: Json) -> Result<bool, IcebergError> {
        let parent = base
            .current_snapshot()
            .and_then(|s| s.get("snapshot-id"))
            .cloned()
            .unwrap_or(Json::Null);
        let id = snapshot.get("snapshot-id").cloned().unwrap_or(Json::Null);
        let mut requirements = vec![json!({
            "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent,
        })];
        if let Some(uuid) = base.uuid() {
            requirements.push(json!({"type": "assert-table-uuid", "uuid": uuid}));
        }
        let levels: Vec<&str> = self.namespace.split('.').collect();
        let body = json!({
            "identifier": {"namespace": levels, "name": self.table},
            "requirements": requirements,
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": id},
            ],
        });
        let path = self.table_path().await?;
        let (status, answer) = self.request(Method::POST, &path, Some(body)).await?;
        match status {
            StatusCode::CONFLICT => Ok(false),
            status if status.is_success() => Ok(true),
            // The commit may have been applied or not: the next try reloads the table and
            // finds its transaction if it was.
            status => Err(self.refused("committing", status, &answer)),
        }
    }

    fn table(&self, body: &Json) -> Result<RestTable, IcebergError> {
        let location = body
            .get("metadata-location")
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string();
        let metadata = body.get("metadata").cloned().ok_or_else(|| {
            IcebergError::Metadata(format!("the catalog answered no metadata: {body}"))
        })?;
        Ok(RestTable {
            metadata: TableMetadata::from_json(metadata, &location)?,
            location,
        })
    }
}
