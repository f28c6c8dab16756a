//! Tables and views of a script, and the [`ContextProvider`] that lets DataFusion bind
//! queries against them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, SchemaRef};
use datafusion_common::config::ConfigOptions;
use datafusion_common::{TableReference, plan_err};
use datafusion_expr::planner::{ContextProvider, ExprPlanner, RelationPlanner};
use datafusion_expr::{
    AggregateUDF, HigherOrderUDF, LogicalPlan, ScalarUDF, TableSource, WindowUDF,
};
use eddy_common::error::Location;
use eddy_connectors::TableConnector;

/// A table declared with `CREATE TABLE`, bound to its connector.
#[derive(Debug)]
pub struct TableDef {
    /// The table's name.
    pub name: String,
    /// Where it was declared.
    pub location: Location,
    /// The columns the connector reads or writes (computed and metadata columns
    /// excluded).
    pub physical_schema: SchemaRef,
    /// Its `METADATA` columns, in order.
    pub metadata: Vec<MetadataColumn>,
    /// `PRIMARY KEY (...)` columns.
    pub primary_key: Vec<String>,
    /// `PARTITIONED BY (...)` columns.
    pub partition_keys: Vec<String>,
    /// The `WITH (...)` options.
    pub options: BTreeMap<String, String>,
    /// The connector, configured and validated.
    pub connector: Arc<dyn TableConnector>,
    /// The table as a query: the connector's rows, computed columns and watermark.
    pub plan: LogicalPlan,
}

/// A `METADATA` column of a table.
#[derive(Debug, Clone)]
pub struct MetadataColumn {
    /// The column's name.
    pub name: String,
    /// The connector's key.
    pub key: String,
    /// `VIRTUAL`: not written.
    pub is_virtual: bool,
}

/// The scan of a table's physical columns (and the metadata read with them): the leaf the
/// streaming planner turns into a source.
#[derive(Debug)]
pub struct ConnectorSource {
    /// The table's name.
    pub table: String,
    /// Its physical columns, then its metadata columns (of the metadata's own types).
    pub schema: SchemaRef,
    /// The metadata keys of the columns after the physical ones.
    pub metadata: Vec<String>,
    /// Its connector.
    pub connector: Arc<dyn TableConnector>,
    /// Its `PRIMARY KEY` columns, as indexes into `schema`.
    pub primary_key: Vec<usize>,
}

impl TableSource for ConnectorSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// A table read `FOR SYSTEM_TIME AS OF` a time column of the other side of a join: its
/// rows as of each row's time (a lookup join, on processing time). Not inlined: the
/// streaming planner finds it under the join.
#[derive(Debug)]
pub struct VersionedSource {
    /// The table.
    pub table: Arc<TableDef>,
    /// The time column named after `AS OF`, as written (`o.proc_time`).
    pub as_of: String,
    /// Whether that column is a processing-time attribute (a lookup join) or not (an
    /// event-time temporal join), as the binder's check found.
    pub processing_time: std::sync::OnceLock<bool>,
}

impl TableSource for VersionedSource {
    fn schema(&self) -> SchemaRef {
        self.table.physical_schema.clone()
    }
}

/// A named query (a view, or a table with computed columns) that the binder inlines.
#[derive(Debug)]
struct InlinedSource {
    schema: SchemaRef,
    plan: LogicalPlan,
}

impl TableSource for InlinedSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn get_logical_plan(&self) -> Option<Cow<'_, LogicalPlan>> {
        Some(Cow::Borrowed(&self.plan))
    }
}

/// The tables, views and functions a script has declared so far.
#[derive(Debug, Default)]
pub struct Catalog {
    tables: HashMap<String, Arc<TableDef>>,
    views: HashMap<String, LogicalPlan>,
    functions: HashMap<String, UserFunction>,
    /// Declared aggregate functions, lower case, and whether each is `TEMPORARY SYSTEM`.
    aggregates: HashMap<String, (bool, Arc<AggregateUDF>)>,
}

/// A function a script declares (`CREATE FUNCTION`).
#[derive(Debug, Clone)]
pub struct UserFunction {
    /// Its name, lower case.
    pub name: String,
    /// `TEMPORARY SYSTEM`: it hides a built-in function of its name. Else a built-in
    /// function of its name hides it (Flink's order of resolution).
    pub system: bool,
    /// A table function: called only in `LATERAL TABLE(...)`.
    pub table: bool,
    /// The function.
    pub udf: Arc<ScalarUDF>,
}

impl Catalog {
    /// Every table, in the order declared.
    pub fn tables(&self) -> Vec<Arc<TableDef>> {
        let mut tables: Vec<Arc<TableDef>> = self.tables.values().cloned().collect();
        tables.sort_by_key(|t| (t.location.line, t.location.column));
        tables
    }

    /// Adds a table; its name must be new.
    pub fn add_table(&mut self, table: TableDef) -> Result<(), String> {
        self.check_new(&table.name)?;
        self.tables.insert(table.name.clone(), Arc::new(table));
        Ok(())
    }

    /// Adds a view; its name must be new.
    pub fn add_view(&mut self, name: String, plan: LogicalPlan) -> Result<(), String> {
        self.check_new(&name)?;
        self.views.insert(name, plan);
        Ok(())
    }

    /// Adds a function (the caller checked its name is new).
    pub fn add_function(&mut self, function: UserFunction) {
        self.functions
            .insert(function.name.to_ascii_lowercase(), function);
    }

    /// Adds an aggregate function (the caller checked its name is new).
    pub fn add_aggregate(&mut self, name: String, system: bool, function: AggregateUDF) {
        self.aggregates
            .insert(name.to_ascii_lowercase(), (system, Arc::new(function)));
    }

    /// The declared function with this name.
    pub fn function(&self, name: &str) -> Option<&UserFunction> {
        self.functions.get(&name.to_ascii_lowercase())
    }

    /// Whether a function (of any kind) with this name is declared.
    pub fn has_function(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        self.functions.contains_key(&name) || self.aggregates.contains_key(&name)
    }

    /// How many functions (of every kind) are declared.
    pub fn function_count(&self) -> usize {
        self.functions.len() + self.aggregates.len()
    }

    /// The table with this name.
    pub fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(name)
    }

    /// The names of the tables' ROW columns.
    pub fn row_columns(&self) -> std::collections::HashSet<String> {
        self.tables
            .values()
            .flat_map(|t| t.physical_schema.fields().iter())
            .filter(|f| matches!(f.data_type(), arrow::datatypes::DataType::Struct(_)))
            .map(|f| f.name().clone())
            .collect()
    }

    fn check_new(&self, name: &str) -> Result<(), String> {
        if self.tables.contains_key(name) || self.views.contains_key(name) {
            return Err(format!("a table or view named '{name}' already exists"));
        }
        Ok(())
    }

    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tables
            .keys()
            .chain(self.views.keys())
            .map(String::as_str)
            .collect();
        names.sort();
        names
    }
}

/// The functions queries may call, built once.
struct Functions {
    scalars: HashMap<String, Arc<ScalarUDF>>,
    aggregates: HashMap<String, Arc<AggregateUDF>>,
    windows: HashMap<String, Arc<WindowUDF>>,
    expr_planners: Vec<Arc<dyn ExprPlanner>>,
    relation_planners: Vec<Arc<dyn RelationPlanner>>,
    options: ConfigOptions,
}

static FUNCTIONS: LazyLock<Functions> = LazyLock::new(|| {
    let mut scalars = HashMap::new();
    for f in datafusion_functions::all_default_functions()
        .into_iter()
        .chain(super::functions::all())
    {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            scalars.insert(name.to_ascii_lowercase(), f.clone());
        }
    }
    let mut aggregates = HashMap::new();
    for f in datafusion_functions_aggregate::all_default_aggregate_functions()
        .into_iter()
        .chain(super::functions::aggregates::functions())
    {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            aggregates.insert(name.to_ascii_lowercase(), f.clone());
        }
    }
    let windows = super::functions::ranking::functions()
        .into_iter()
        .map(|f| (f.name().to_string(), f))
        .collect();
    let mut options = ConfigOptions::default();
    options.sql_parser.map_string_types_to_utf8view = false;
    options.sql_parser.collect_spans = true;
    Functions {
        scalars,
        aggregates,
        windows,
        expr_planners: vec![
            Arc::new(super::functions::FlinkSyntaxPlanner),
            Arc::new(datafusion_functions::core::planner::CoreFunctionPlanner {}),
            Arc::new(datafusion_functions::unicode::planner::UnicodeFunctionPlanner),
            Arc::new(datafusion_functions::datetime::planner::DatetimeFunctionPlanner),
            Arc::new(datafusion_functions_aggregate::planner::AggregateFunctionPlanner),
        ],
        relation_planners: vec![
            Arc::new(super::window_tvf::WindowTvfPlanner),
            Arc::new(super::lateral_table::LateralTablePlanner),
            Arc::new(super::functions::arrays::UnnestRefusal),
        ],
        options,
    }
});

/// Resolves names in queries against a [`Catalog`] and the built-in functions.
pub struct Provider<'a> {
    catalog: &'a Catalog,
}

impl<'a> Provider<'a> {
    /// A provider over `catalog`.
    pub fn new(catalog: &'a Catalog) -> Self {
        Provider { catalog }
    }

    /// Whether a built-in scalar, aggregate or window function has this name.
    pub fn is_built_in(name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        FUNCTIONS.scalars.contains_key(&name)
            || FUNCTIONS.aggregates.contains_key(&name)
            || FUNCTIONS.windows.contains_key(&name)
    }

    /// The session options DataFusion plans with.
    pub fn config_options() -> &'static ConfigOptions {
        &FUNCTIONS.options
    }
}

impl ContextProvider for Provider<'_> {
    fn get_table_source(
        &self,
        name: TableReference,
    ) -> datafusion_common::Result<Arc<dyn TableSource>> {
        let key = name.table();
        if let Some((table, as_of)) = key.split_once(super::script::AS_OF_MARKER) {
            return match self.catalog.tables.get(table) {
                Some(table) => Ok(Arc::new(VersionedSource {
                    table: table.clone(),
                    as_of: as_of.to_string(),
                    processing_time: std::sync::OnceLock::new(),
                })),
                None if self.catalog.views.contains_key(table) => plan_err!(
                    "unsupported: a view read FOR SYSTEM_TIME AS OF (versioned views, for \
                     event-time temporal joins, are not supported yet)"
                ),
                None => plan_err!("table '{table}' does not exist"),
            };
        }
        if let Some(table) = self.catalog.tables.get(key) {
            return Ok(Arc::new(InlinedSource {
                schema: Arc::new(table.plan.schema().as_arrow().clone()),
                plan: table.plan.clone(),
            }));
        }
        if let Some(plan) = self.catalog.views.get(key) {
            return Ok(Arc::new(InlinedSource {
                schema: Arc::new(plan.schema().as_arrow().clone()),
                plan: plan.clone(),
            }));
        }
        let known = self.catalog.names();
        plan_err!(
            "table or view '{name}' does not exist{}",
            if known.is_empty() {
                " (no tables are declared yet)".to_string()
            } else {
                format!(" (declared: {})", known.join(", "))
            }
        )
    }

    fn get_expr_planners(&self) -> &[Arc<dyn ExprPlanner>] {
        &FUNCTIONS.expr_planners
    }

    fn get_relation_planners(&self) -> &[Arc<dyn RelationPlanner>] {
        &FUNCTIONS.relation_planners
    }

    fn get_function_meta(&self, name: &str) -> Option<Arc<ScalarUDF>> {
        // `LATERAL TABLE(f(...))` asks for its table function under a name of its own;
        // anywhere else a table function is refused.
        if let Some(name) = name.strip_prefix(super::lateral_table::TABLE_FUNCTION) {
            let function = self.catalog.function(name).filter(|f| f.table)?;
            return Some(function.udf.clone());
        }
        let declared = self.catalog.function(name);
        if let Some(table) = declared.filter(|f| f.table) {
            return Some(super::lateral_table::misplaced(&table.name));
        }
        if let Some(system) = declared.filter(|f| f.system) {
            return Some(system.udf.clone());
        }
        let built_in = FUNCTIONS.scalars.get(&name.to_ascii_lowercase());
        built_in.or(declared.map(|f| &f.udf)).cloned()
    }

    fn get_higher_order_meta(&self, _name: &str) -> Option<Arc<HigherOrderUDF>> {
        None
    }

    fn get_aggregate_meta(&self, name: &str) -> Option<Arc<AggregateUDF>> {
        let name = name.to_ascii_lowercase();
        let declared = self.catalog.aggregates.get(&name);
        if let Some((_, system)) = declared.filter(|(system, _)| *system) {
            return Some(system.clone());
        }
        let built_in = FUNCTIONS.aggregates.get(&name);
        built_in.or(declared.map(|(_, f)| f)).cloned()
    }

    fn get_window_meta(&self, name: &str) -> Option<Arc<WindowUDF>> {
        FUNCTIONS.windows.get(&name.to_ascii_lowercase()).cloned()
    }

    fn get_variable_type(&self, _variable_names: &[String]) -> Option<DataType> {
        None
    }

    fn options(&self) -> &ConfigOptions {
        &FUNCTIONS.options
    }

    fn udf_names(&self) -> Vec<String> {
        let declared = self.catalog.functions.keys();
        FUNCTIONS.scalars.keys().chain(declared).cloned().collect()
    }

    fn higher_order_function_names(&self) -> Vec<String> {
        Vec::new()
    }

    fn udaf_names(&self) -> Vec<String> {
        let declared = self.catalog.aggregates.keys();
        FUNCTIONS
            .aggregates
            .keys()
            .chain(declared)
            .cloned()
            .collect()
    }

    fn udwf_names(&self) -> Vec<String> {
        FUNCTIONS.windows.keys().cloned().collect()
    }
}
