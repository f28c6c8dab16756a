//! A client of a Confluent-compatible schema registry's REST API: the schemas of ids
//! (fetched once and cached) and the registration of a writer's schema under a subject.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;

use crate::url::percent_encode;

/// How long one request may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// The registry's media type.
const MEDIA_TYPE: &str = "application/vnd.schemaregistry.v1+json";

/// What went wrong talking to the registry.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The request did not get an answer.
    #[error("schema registry {url}: {source}")]
    Unreachable {
        /// The request's URL.
        url: String,
        /// Why.
        #[source]
        source: reqwest::Error,
    },
    /// The registry refused the request.
    #[error("schema registry {url} answered {status}: {message}")]
    Refused {
        /// The request's URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The registry's message.
        message: String,
    },
    /// The schema of an id is not Avro.
    #[error("schema id {id} in the registry is a {kind} schema, not Avro")]
    NotAvro {
        /// The schema id.
        id: u32,
        /// The registry's `schemaType`.
        kind: String,
    },
}

impl RegistryError {
    /// The error of `table`'s connector: transient for an unanswered request or a
    /// registry's server error, not for a refusal (a schema the subject's compatibility
    /// rule rejects, bad credentials).
    pub fn for_table(self, table: &str) -> eddy_common::EddyError {
        let transient = match &self {
            RegistryError::Unreachable { .. } => true,
            RegistryError::Refused { status, .. } => *status >= 500 || *status == 429,
            RegistryError::NotAvro { .. } => false,
        };
        eddy_common::EddyError::Remote {
            table: table.to_string(),
            message: self.to_string(),
            transient,
        }
    }
}

/// How requests authenticate (Flink's `avro-confluent.basic-auth.*` and
/// `avro-confluent.bearer-auth.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryAuth {
    /// HTTP basic authentication with `user:password`.
    Basic {
        /// The user.
        user: String,
        /// The password.
        password: String,
    },
    /// A bearer token.
    Bearer(String),
}

/// A schema registry, its answers cached.
#[derive(Debug)]
pub struct Registry {
    url: String,
    auth: Option<RegistryAuth>,
    client: reqwest::Client,
    /// Schemas by id, as fetched (an id's schema never changes).
    schemas: Mutex<HashMap<u32, Arc<str>>>,
    /// Ids of schemas registered, by subject and schema.
    registered: Mutex<HashMap<(String, String), u32>>,
}

#[derive(Deserialize)]
struct SchemaAnswer {
    schema: String,
    #[serde(rename = "schemaType")]
    schema_type: Option<String>,
}

#[derive(Deserialize)]
struct IdAnswer {
    id: u32,
}

impl Registry {
    /// A client of the registry at `url` (`http://host:port`, any path prefix kept).
    pub fn new(url: &str, auth: Option<RegistryAuth>) -> Self {
        Registry {
            url: url.trim_end_matches('/').to_string(),
            auth,
            client: reqwest::Client::builder()
                .timeout(TIMEOUT)
                .build()
                .unwrap_or_default(),
            schemas: Mutex::default(),
            registered: Mutex::default(),
        }
    }

    /// The registry's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema of `id`; `None` when the registry has no such id.
    pub async fn schema(&self, id: u32) -> Result<Option<Arc<str>>, RegistryError> {
        if let Some(schema) = self.schemas.lock().expect("schemas lock").get(&id) {
            return Ok(Some(schema.clone()));
        }
        let url = format!("{}/schemas/ids/{id}", self.url);
        let request = self.client.get(&url).header("Accept", MEDIA_TYPE);
        let Some(answer) = self.send::<SchemaAnswer>(&url, request).await? else {
            return Ok(None);
        };
        match answer.schema_type.as_deref() {
            None | Some("AVRO") => {}
            Some(other) => {
                return Err(RegistryError::NotAvro {
                    id,
                    kind: other.to_string(),
                });
            }
        }
        let schema: Arc<str> = answer.schema.into();
        let mut schemas = self.schemas.lock().expect("schemas lock");
        schemas.insert(id, schema.clone());
        Ok(Some(schema))
    }

    /// Registers `schema` under `subject` (the registry answers with the existing id when
    /// the subject has it already) and returns its id.
    pub async fn register(&self, subject: &str, schema: &str) -> Result<u32, RegistryError> {
        let key = (subject.to_string(), schema.to_string());
        if let Some(id) = self.registered.lock().expect("registered lock").get(&key) {
            return Ok(*id);
        }
        let url = format!("{}/subjects/{}/versions", self.url, percent_encode(subject));
        let body = serde_json::json!({ "schema": schema }).to_string();
        let request = self
            .client
            .post(&url)
            .header("Content-Type", MEDIA_TYPE)
            .header("Accept", MEDIA_TYPE)
            .body(body);
        let answer = self.send::<IdAnswer>(&url, request).await?;
        let Some(IdAnswer { id }) = answer else {
            return Err(RegistryError::Refused {
                url,
                status: 404,
                message: format!("subject '{subject}' cannot be registered"),
            });
        };
        self.registered
            .lock()
            .expect("registered lock")
            .insert(key, id);
        Ok(id)
    }

    /// Sends a request with the credentials; `None` for a 404.
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        mut request: reqwest::RequestBuilder,
    ) -> Result<Option<T>, RegistryError> {
        request = match &self.auth {
            None => request,
            Some(RegistryAuth::Basic { user, password }) => {
                request.basic_auth(user, Some(password))
            }
            Some(RegistryAuth::Bearer(token)) => request.bearer_auth(token),
        };
        let unreachable = |source| RegistryError::Unreachable {
            url: url.to_string(),
            source,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !status.is_success() {
            let message = response.text().await.unwrap_or_default();
            return Err(RegistryError::Refused {
                url: url.to_string(),
                status: status.as_u16(),
                message: message.chars().take(500).collect(),
            });
        }
        response.json::<T>().await.map(Some).map_err(unreachable)
    }
}
