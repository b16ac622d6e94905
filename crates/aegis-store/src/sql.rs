//! Building a query with bound values that both engines read. sqlx's `QueryBuilder` writes `?`
//! for the Any driver, which PostgreSQL refuses; `$1`, `$2`, … are read by both (SQLite takes
//! `$N` as the N-th value). And the few expressions the two dialects spell differently.

use std::fmt::Write;

use sqlx::any::AnyArguments;
use sqlx::{Any, Arguments, Encode, Type};

use crate::database::Engine;

/// A query text and its values, numbered as they are pushed.
pub(crate) struct Sql {
    text: String,
    args: AnyArguments<'static>,
    binds: usize,
    /// Rows of `VALUES` begun, and values pushed into the current one.
    rows: usize,
    row_values: usize,
    /// The first value that could not be encoded; reported when the query runs.
    unencodable: Option<String>,
}

impl Sql {
    pub(crate) fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            args: AnyArguments::default(),
            binds: 0,
            rows: 0,
            row_values: 0,
            unencodable: None,
        }
    }

    pub(crate) fn push(&mut self, text: impl AsRef<str>) -> &mut Self {
        self.text.push_str(text.as_ref());
        self
    }

    pub(crate) fn push_bind<T>(&mut self, value: T) -> &mut Self
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        // Writing to a String cannot fail.
        let _ = write!(self.text, "${}", self.binds + 1);
        self.bind(value)
    }

    /// A value the text already names as `$N`, N being the number of values bound before it plus
    /// one: for a value the text names more than once.
    pub(crate) fn bind<T>(&mut self, value: T) -> &mut Self
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        self.binds += 1;
        if let Err(e) = self.args.add(value) {
            self.unencodable.get_or_insert(e.to_string());
        }
        self
    }

    /// `values` bound and separated by commas (for `IN (…)`).
    pub(crate) fn push_binds<T>(&mut self, values: impl IntoIterator<Item = T>) -> &mut Self
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        for (i, value) in values.into_iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.push_bind(value);
        }
        self
    }

    /// Opens a row of a multi-row `VALUES`, after a comma from the row before.
    pub(crate) fn begin_row(&mut self) -> &mut Self {
        self.push(if self.rows == 0 { "(" } else { ", (" });
        self.rows += 1;
        self.row_values = 0;
        self
    }

    /// A value of the open row, after a comma from the value before.
    pub(crate) fn value<T>(&mut self, value: T) -> &mut Self
    where
        T: 'static + Encode<'static, Any> + Type<Any>,
    {
        if self.row_values > 0 {
            self.push(", ");
        }
        self.row_values += 1;
        self.push_bind(value)
    }

    /// Closes the open row.
    pub(crate) fn end_row(&mut self) -> &mut Self {
        self.push(")")
    }

    /// Rows of `VALUES` begun so far.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// The text and values, for `sqlx::query_with` and its kin.
    pub(crate) fn into_parts(self) -> Result<(String, AnyArguments<'static>), sqlx::Error> {
        match self.unencodable {
            Some(e) => Err(sqlx::Error::Encode(e.into())),
            None => Ok((self.text, self.args)),
        }
    }
}

/// The UTC day (`YYYY-MM-DD`) of a column of Unix milliseconds.
pub(crate) fn utc_day(engine: Engine, millis: &str) -> String {
    match engine {
        Engine::Sqlite => format!("date({millis} / 1000, 'unixepoch')"),
        Engine::Postgres => {
            format!("to_char(to_timestamp({millis} / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')")
        }
    }
}

/// ` AND m.id IN (…)`: messages whose text has every word of `text` (the last as a prefix, for
/// search-as-you-type), through FTS5 on SQLite and the `aegis_search` text-search configuration
/// on PostgreSQL (`migrations/postgres`). Both fold case and accents.
pub(crate) fn push_text_search(q: &mut Sql, engine: Engine, text: &str) {
    match (engine, search_query(engine, text)) {
        // Nothing searchable (only punctuation): nothing can match.
        (_, None) => q.push(" AND FALSE"),
        (Engine::Sqlite, Some(query)) => q
            .push(" AND m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ")
            .push_bind(query)
            .push(")"),
        (Engine::Postgres, Some(query)) => q
            .push(" AND to_tsvector('aegis_search', m.text) @@ to_tsquery('aegis_search', ")
            .push_bind(query)
            .push(")"),
    };
}

/// A user's words as the engine's full-text query, all of them required: runs of letters and
/// digits, each quoted (so `AND`, `*`, `&` and friends are just text), the last also a prefix.
fn search_query(engine: Engine, text: &str) -> Option<String> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let last = words.len().checked_sub(1)?;
    let terms = words
        .iter()
        .enumerate()
        .map(|(i, w)| match (engine, i == last) {
            (Engine::Sqlite, false) => format!("\"{w}\""),
            (Engine::Sqlite, true) => format!("\"{w}\"*"),
            (Engine::Postgres, false) => format!("'{w}'"),
            (Engine::Postgres, true) => format!("'{w}':*"),
        });
    let separator = match engine {
        Engine::Sqlite => " ",
        Engine::Postgres => " & ",
    };
    Some(terms.collect::<Vec<_>>().join(separator))
}

/// ` FOR UPDATE` on PostgreSQL, where writers run side by side and a row must be locked before
/// the decision it guards is counted; nothing on SQLite, whose single writer already serialises
/// them.
pub(crate) fn lock_rows(engine: Engine) -> &'static str {
    match engine {
        Engine::Sqlite => "",
        Engine::Postgres => " FOR UPDATE",
    }
}

/// `expr` (a score in [0, 1]) as one of ten bins, 0 to 9, the top bin closed: spelled with
/// comparisons because `CAST(… AS INTEGER)` truncates in SQLite and rounds in PostgreSQL.
pub(crate) fn decile(expr: &str) -> String {
    let mut case = String::from("CASE");
    for bin in 1..10 {
        let _ = write!(case, " WHEN {expr} * 10 < {bin} THEN {}", bin - 1);
    }
    case.push_str(" ELSE 9 END");
    case
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_numbered_as_pushed() {
        let mut q = Sql::new("SELECT 1 WHERE a = ");
        q.push_bind(1_i64)
            .push(" AND b IN (")
            .push_binds(["x".to_string(), "y".to_string()]);
        q.push(")");
        let (text, _) = q.into_parts().expect("encoded");
        assert_eq!(text, "SELECT 1 WHERE a = $1 AND b IN ($2, $3)");
    }

    #[test]
    fn rows_of_values_are_separated() {
        let mut q = Sql::new("INSERT INTO t (a, b) VALUES ");
        for i in 0..2_i64 {
            q.begin_row().value(i).value(format!("x{i}")).end_row();
        }
        assert_eq!(q.rows(), 2);
        assert_eq!(
            q.into_parts().expect("encoded").0,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)"
        );
    }

    #[test]
    fn search_words_are_quoted_for_each_engine() {
        let text = "Beli saham, \"pasti\" cuan!";
        assert_eq!(
            search_query(Engine::Sqlite, text).as_deref(),
            Some("\"Beli\" \"saham\" \"pasti\" \"cuan\"*")
        );
        assert_eq!(
            search_query(Engine::Postgres, text).as_deref(),
            Some("'Beli' & 'saham' & 'pasti' & 'cuan':*")
        );
        assert_eq!(
            search_query(Engine::Sqlite, "AND OR NOT *").as_deref(),
            Some("\"AND\" \"OR\" \"NOT\"*")
        );
        assert_eq!(search_query(Engine::Postgres, "?!..."), None);
        let mut none = Sql::new("");
        push_text_search(&mut none, Engine::Sqlite, "?!...");
        assert_eq!(none.into_parts().expect("encoded").0, " AND FALSE");
    }

    #[test]
    fn deciles_close_the_top_bin() {
        assert!(decile("s").starts_with("CASE WHEN s * 10 < 1 THEN 0 WHEN s * 10 < 2 THEN 1"));
        assert!(decile("s").ends_with("WHEN s * 10 < 9 THEN 8 ELSE 9 END"));
    }
}
