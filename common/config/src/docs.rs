//! Key documentation: the `///` comments of config fields, collected once by
//! [`config_struct!`](crate::config_struct) so the sample config and rustdoc
//! can never disagree.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Docs for the keys of one config type, in declaration order, keys dotted
/// for nested sections (`"raft.fsync"`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Docs {
    entries: Vec<(String, String)>,
}

impl Docs {
    /// Adds `key` (documented by the lines of its `///` comment) and, nested
    /// under it, the keys of its type `T` when `T` is itself a section.
    pub fn field<T: Documented>(&mut self, key: &str, doc_lines: &[&str]) {
        // `/// text` arrives as " text": drop the one space rustdoc also drops.
        let doc = doc_lines
            .iter()
            .map(|line| line.strip_prefix(' ').unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n");
        self.entries.push((key.to_owned(), doc));
        for (sub_key, sub_doc) in T::docs().entries {
            self.entries.push((format!("{key}.{sub_key}"), sub_doc));
        }
    }

    /// The doc of a dotted key, if it has one.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, doc)| doc.as_str())
    }

    /// Every `(dotted key, doc)`, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, d)| (k.as_str(), d.as_str()))
    }

    /// The direct children of a section (`""` is the top level): `(name, doc)`.
    pub(crate) fn children<'a>(
        &'a self,
        section: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.iter().filter_map(move |(key, doc)| {
            let rest = if section.is_empty() {
                key
            } else {
                key.strip_prefix(section)?.strip_prefix('.')?
            };
            (!rest.contains('.')).then_some((rest, doc))
        })
    }
}

/// A type that can tell what each of its config keys means. Sections get it
/// from [`config_struct!`](crate::config_struct); plain values have no keys
/// of their own, so the default (no docs) is right for them.
pub trait Documented {
    /// Docs for this type's keys, relative to the type.
    fn docs() -> Docs {
        Docs::default()
    }
}

macro_rules! plain_values {
    ($($t:ty),* $(,)?) => { $(impl Documented for $t {})* };
}
plain_values!(bool, u16, u32, u64, usize, i64, f64, String, PathBuf, Duration, SocketAddr);

/// Lists are values, not sections: `[[peers]]` elements are documented on
/// the list's own key.
impl<T> Documented for Vec<T> {}

/// Declares a config section (or a daemon's whole config): a struct whose
/// every field has a `///` doc and a default, written once.
///
/// ```
/// rozone_config::config_struct! {
///     /// Example section.
///     pub struct Example {
///         /// How long to wait for a peer before giving up.
///         #[serde(with = "rozone_config::duration")]
///         pub timeout: std::time::Duration = std::time::Duration::from_secs(5),
///     }
/// }
/// assert_eq!(<Example as rozone_config::Documented>::docs().get("timeout"),
///            Some("How long to wait for a peer before giving up."));
/// ```
///
/// Generates `Debug, Clone, PartialEq, Serialize, Deserialize` (with
/// `#[serde(default, deny_unknown_fields)]`, so a misspelt key is an error),
/// `Default` from the `= default` expressions, and [`Documented`] from the
/// docs. Per field, `///` lines come first, then any `#[serde(...)]`.
///
/// An optional trailing `runtime { ... }` block holds fields that are set by
/// the process, never read from a file (e.g. `--init`): they are
/// `#[serde(skip)]` and absent from the sample config. The calling crate
/// must depend on `serde`.
#[macro_export]
macro_rules! config_struct {
    (
        $(#[doc = $struct_doc:literal])+
        pub struct $name:ident {
            $(
                $(#[doc = $doc:literal])+
                $(#[serde($($serde:tt)*)])*
                pub $field:ident: $ty:ty = $default:expr,
            )*
        }
        $(
            runtime {
                $(
                    $(#[doc = $rt_doc:literal])+
                    pub $rt_field:ident: $rt_ty:ty = $rt_default:expr,
                )*
            }
        )?
    ) => {
        $(#[doc = $struct_doc])+
        #[derive(Debug, Clone, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name {
            $(
                $(#[doc = $doc])+
                $(#[serde($($serde)*)])*
                pub $field: $ty,
            )*
            $($(
                $(#[doc = $rt_doc])+
                #[serde(skip)]
                pub $rt_field: $rt_ty,
            )*)?
        }

        impl ::std::default::Default for $name {
            fn default() -> Self {
                Self {
                    $($field: $default,)*
                    $($($rt_field: $rt_default,)*)?
                }
            }
        }

        impl $crate::Documented for $name {
            fn docs() -> $crate::Docs {
                let mut docs = $crate::Docs::default();
                $(docs.field::<$ty>(::std::stringify!($field), &[$($doc),+]);)*
                docs
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::config_struct! {
        /// Inner.
        pub struct Inner {
            /// First line.
            /// Second line.
            pub a: u64 = 1,
        }
    }

    crate::config_struct! {
        /// Outer.
        pub struct Outer {
            /// The inner section.
            pub inner: Inner = Inner::default(),
            /// A list.
            pub list: Vec<String> = vec![],
        }
        runtime {
            /// Set by the process.
            pub mode: u64 = 7,
        }
    }

    #[test]
    fn docs_nest_sections_and_keep_declaration_order() {
        let docs = Outer::docs();
        let keys: Vec<_> = docs.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["inner", "inner.a", "list"]);
        assert_eq!(docs.get("inner.a"), Some("First line.\nSecond line."));
        let top: Vec<_> = docs.children("").map(|(k, _)| k).collect();
        assert_eq!(top, ["inner", "list"]);
        let inner: Vec<_> = docs.children("inner").map(|(k, _)| k).collect();
        assert_eq!(inner, ["a"]);
    }

    #[test]
    fn runtime_fields_have_defaults_but_no_keys() {
        let outer = Outer::default();
        assert_eq!(outer.mode, 7);
        assert!(Outer::docs().get("mode").is_none());
    }
}
