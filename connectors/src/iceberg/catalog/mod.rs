//! Where a table's current metadata is kept, and how a commit replaces it: the SQL catalog
//! ([`sql`], on PostgreSQL or [`sqlite`]) or a REST catalog ([`rest`]).

mod rest;
mod sql;
mod sqlite;

pub use rest::{RestAuth, RestCatalog};
pub use sql::{CatalogDatabase, SqlCatalog};
pub use sqlite::database_file;

/// The catalog a table is registered in.
#[derive(Debug, Clone)]
pub enum Catalog {
    /// Iceberg's `JdbcCatalog` tables on PostgreSQL or SQLite.
    Sql(SqlCatalog),
    /// The Iceberg REST catalog protocol.
    Rest(RestCatalog),
}

impl Catalog {
    /// The table's name in the catalog, `namespace.table`, for messages.
    pub fn table_name(&self) -> String {
        match self {
            Catalog::Sql(sql) => format!("{}.{}", sql.namespace, sql.table),
            Catalog::Rest(rest) => format!("{}.{}", rest.namespace, rest.table),
        }
    }
}
