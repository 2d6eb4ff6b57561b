//! Verdicts by content hash, on disk (`judge-cache.jsonl` in the run directory, one flushed line
//! per judged group): the same judge model shown the same prompt answers from here, so a resumed
//! run or a repeated `score` never pays twice for a group.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::prompt::{Prompt, Verdict};
use crate::cost::Usage;

#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    verdicts: Vec<Verdict>,
    usage: Usage,
}

pub struct JudgeCache {
    entries: Mutex<HashMap<String, Vec<Verdict>>>,
    file: Mutex<std::fs::File>,
}

impl JudgeCache {
    /// Opens (or creates) the cache file; unreadable lines (a torn last write) are ignored.
    pub fn open(path: &Path) -> std::io::Result<JudgeCache> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut entries = HashMap::new();
        if path.exists() {
            for line in std::io::BufReader::new(std::fs::File::open(path)?).lines() {
                if let Ok(e) = serde_json::from_str::<Entry>(&line?) {
                    entries.insert(e.key, e.verdicts);
                }
            }
        }
        let file = ta_types::jsonl::open_append(path)?;
        Ok(JudgeCache { entries: Mutex::new(entries), file: Mutex::new(file) })
    }

    /// SHA-256 of the judge model and the exact prompt.
    pub fn key(model: &str, prompt: &Prompt) -> String {
        let mut h = Sha256::new();
        for part in [model, "\u{0}", &prompt.system, "\u{0}", &prompt.user] {
            h.update(part.as_bytes());
        }
        format!("{:x}", h.finalize())
    }

    pub fn get(&self, key: &str) -> Option<Vec<Verdict>> {
        self.entries.lock().expect("cache lock").get(key).cloned()
    }

    pub fn put(&self, key: &str, verdicts: &[Verdict], usage: Usage) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(&Entry { key: key.to_string(), verdicts: verdicts.to_vec(), usage }).map_err(std::io::Error::other)?;
        line.push(b'\n');
        {
            let mut f = self.file.lock().expect("cache lock");
            f.write_all(&line)?;
            f.flush()?;
        }
        self.entries.lock().expect("cache lock").insert(key.to_string(), verdicts.to_vec());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_survive_a_reopen_and_keys_depend_on_model_and_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("judge-cache.jsonl");
        let p = Prompt { system: "s".into(), user: "u".into() };
        let k = JudgeCache::key("openai/gpt-4o-mini", &p);
        assert_ne!(k, JudgeCache::key("openai/gpt-4o", &p));
        assert_ne!(k, JudgeCache::key("openai/gpt-4o-mini", &Prompt { system: "s".into(), user: "v".into() }));
        let v = vec![Verdict { score: 0.5, explanation: "ok".into() }];
        JudgeCache::open(&path).unwrap().put(&k, &v, Usage::default()).unwrap();
        std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(b"{\"key\": \"tor").unwrap();
        let back = JudgeCache::open(&path).unwrap();
        assert_eq!(back.get(&k), Some(v.clone()));
        back.put("second", &v, Usage::default()).unwrap();
        assert_eq!(JudgeCache::open(&path).unwrap().get("second"), Some(v.clone()), "an entry after a torn line is readable");
        assert_eq!(back.get("other"), None);
    }
}
