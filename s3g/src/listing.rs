//! ListObjects (v1 and v2) over the OM's sorted key listing: prefix, delimiter (keys
//! rolled up into CommonPrefixes), max-keys, and a resume point (continuation token,
//! start-after, marker). One roll-up is one entry however many keys it hides; after a
//! roll-up the scan jumps past the whole prefix instead of reading the keys it hides.

use rozone_client::types::Key;

/// Sorts after every valid UTF-8 continuation of a prefix: the largest code point.
const PAST: char = '\u{10FFFF}';
/// Most keys asked of the OM per call.
const PAGE: usize = 1000;
/// S3's ceiling on max-keys.
pub const MAX_KEYS: usize = 1000;

/// One listing request, as both API versions ask it.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub prefix: String,
    pub delimiter: Option<String>,
    /// List names strictly after this one: a start-after as given, or a resume point
    /// made by [`Ask::resume_after`] from a token or marker.
    pub after: String,
    pub max_keys: usize,
}

/// One page of a listing.
#[derive(Debug, Default)]
pub struct Page {
    pub keys: Vec<Key>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// The last name returned (key or common prefix): where the next page resumes.
    pub last: Option<String>,
}

impl Ask {
    /// The roll-up of `name` under the delimiter, if it has one.
    fn rollup(&self, name: &str) -> Option<String> {
        let d = self.delimiter.as_deref().filter(|d| !d.is_empty())?;
        let rest = name.strip_prefix(self.prefix.as_str())?;
        let at = rest.find(d)?;
        Some(format!("{}{}", self.prefix, &rest[..at + d.len()]))
    }

    /// Where a scan resumes after `name`: past every key of a common prefix, or just
    /// after a key.
    pub fn resume_after(&self, name: &str) -> String {
        match self.rollup(name) {
            Some(cp) if cp == name => format!("{cp}{PAST}"),
            _ => name.to_string(),
        }
    }
}

/// Source of sorted keys: the OM, or a vector in tests.
#[async_trait::async_trait]
pub trait Keys {
    /// Keys starting with `prefix` after `after`, in order, at most `limit`.
    async fn keys(
        &self,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Vec<Key>, rozone_client::ClientError>;
}

/// One page of `ask` from `src`.
pub async fn list(src: &(dyn Keys + Sync), ask: &Ask) -> Result<Page, rozone_client::ClientError> {
    let mut page = Page::default();
    let mut after = ask.after.clone();
    let max = ask.max_keys.min(MAX_KEYS);
    loop {
        let want = (max - page.keys.len() - page.prefixes.len() + 1).min(PAGE);
        let batch = src.keys(&ask.prefix, &after, want).await?;
        let full = batch.len() == want;
        let mut jumped = false;
        for k in batch {
            if page.keys.len() + page.prefixes.len() == max {
                page.truncated = true;
                return Ok(page);
            }
            match ask.rollup(&k.name) {
                Some(cp) => {
                    after = format!("{cp}{PAST}");
                    page.last = Some(cp.clone());
                    page.prefixes.push(cp);
                    jumped = true;
                    break;
                }
                None => {
                    after = k.name.clone();
                    page.last = Some(k.name.clone());
                    page.keys.push(k);
                }
            }
        }
        if !jumped && !full {
            return Ok(page);
        }
        if max == 0 {
            return Ok(page);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vec_(Vec<String>);

    #[async_trait::async_trait]
    impl Keys for Vec_ {
        async fn keys(
            &self,
            prefix: &str,
            after: &str,
            limit: usize,
        ) -> Result<Vec<Key>, rozone_client::ClientError> {
            Ok(self
                .0
                .iter()
                .filter(|n| n.starts_with(prefix) && n.as_str() > after)
                .take(limit)
                .map(|n| Key {
                    volume: "v".into(),
                    bucket: "b".into(),
                    name: n.clone(),
                    size: 0,
                    checksum: String::new(),
                    replication: String::new(),
                    version: 0,
                    created_ms: 0,
                    modified_ms: 0,
                    blocks: Vec::new(),
                    s3: None,
                })
                .collect())
        }
    }

    fn names(p: &Page) -> (Vec<&str>, Vec<&str>) {
        (
            p.keys.iter().map(|k| k.name.as_str()).collect(),
            p.prefixes.iter().map(String::as_str).collect(),
        )
    }

    fn src() -> Vec_ {
        let mut v: Vec<String> = ["a/1", "a/2", "a/b/3", "b", "c/1", "c/2", "d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        for i in 0..2500 {
            v.push(format!("e/{i:05}"));
        }
        v.push("f".into());
        v.sort();
        Vec_(v)
    }

    #[tokio::test]
    async fn delimiter_rolls_up_and_pages_resume_past_each_prefix() {
        let s = src();
        let mut ask = Ask {
            delimiter: Some("/".into()),
            max_keys: 2,
            ..Ask::default()
        };
        let mut seen: Vec<String> = Vec::new();
        loop {
            let p = list(&s, &ask).await.unwrap();
            let (k, c) = names(&p);
            seen.extend(k.iter().chain(c.iter()).map(|s| s.to_string()));
            if !p.truncated {
                break;
            }
            ask.after = ask.resume_after(&p.last.unwrap());
        }
        seen.sort();
        assert_eq!(seen, ["a/", "b", "c/", "d", "e/", "f"]);
    }

    #[tokio::test]
    async fn prefix_and_delimiter_list_one_level() {
        let s = src();
        let ask = Ask {
            prefix: "a/".into(),
            delimiter: Some("/".into()),
            max_keys: 1000,
            ..Ask::default()
        };
        let p = list(&s, &ask).await.unwrap();
        assert_eq!(names(&p), (vec!["a/1", "a/2"], vec!["a/b/"]));
        assert!(!p.truncated);
    }

    #[tokio::test]
    async fn without_delimiter_pages_of_max_keys_cover_every_key_once() {
        let s = src();
        let mut ask = Ask {
            prefix: "e/".into(),
            max_keys: 1000,
            ..Ask::default()
        };
        let mut n = 0;
        let mut pages = 0;
        loop {
            let p = list(&s, &ask).await.unwrap();
            n += p.keys.len();
            pages += 1;
            if !p.truncated {
                break;
            }
            ask.after = p.last.unwrap();
        }
        assert_eq!((n, pages), (2500, 3));
    }

    #[tokio::test]
    async fn start_after_skips_and_max_keys_zero_lists_nothing() {
        let s = src();
        let ask = Ask {
            after: "c/1".into(),
            max_keys: 2,
            ..Ask::default()
        };
        let p = list(&s, &ask).await.unwrap();
        assert_eq!(names(&p).0, ["c/2", "d"]);
        assert!(p.truncated);
        let zero = Ask::default();
        let p = list(&s, &zero).await.unwrap();
        assert!(p.keys.is_empty() && p.prefixes.is_empty());
    }
}
