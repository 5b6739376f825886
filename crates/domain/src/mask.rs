//! Secret masking for everything a runner sends out: every secret value, and its base64,
//! URL-encoded and JSON-escaped forms, becomes `*****`. [`StreamMasker`] masks a stream
//! cut into chunks at arbitrary points: it holds back the tail of what it has seen while
//! that tail could still be the start of a secret, so a value split across two chunks is
//! masked too.
//!
//! Values shorter than [`MIN_LEN`] bytes are not masked: replacing every "a" or "1" would
//! destroy the log without protecting anything.

use base64::Engine;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};

pub const MASK: &str = "*****";
pub const MIN_LEN: usize = 4;

#[derive(Clone, Debug, Default)]
pub struct Masker {
    /// Longest first, so an encoding containing a shorter pattern is replaced whole.
    patterns: Vec<String>,
}

impl Masker {
    pub fn new<S: AsRef<str>>(secrets: impl IntoIterator<Item = S>) -> Self {
        let mut m = Masker::default();
        for s in secrets {
            m.add(s.as_ref());
        }
        m
    }

    /// Adds a secret (and its encodings) to mask.
    pub fn add(&mut self, secret: &str) {
        if secret.len() < MIN_LEN {
            return;
        }
        let mut forms = vec![secret.to_owned()];
        let b = secret.as_bytes();
        for engine in [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
        ] {
            let enc = engine.encode(b);
            forms.push(enc.trim_end_matches('=').to_owned());
            forms.push(enc);
        }
        let url = utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string();
        forms.push(url.replace("%20", "+"));
        forms.push(url.clone());
        forms.push(
            url.replace("%2D", "-")
                .replace("%2E", ".")
                .replace("%5F", "_")
                .replace("%7E", "~"),
        );
        if let Ok(j) = serde_json::to_string(secret) {
            forms.push(j[1..j.len() - 1].to_owned());
        }
        // A multi-line value (a key file) may be printed a line at a time.
        for line in secret.lines() {
            if line.trim().len() >= 8 {
                forms.push(line.trim().to_owned());
            }
        }
        for f in forms {
            if f.len() >= MIN_LEN && !self.patterns.contains(&f) {
                self.patterns.push(f);
            }
        }
        self.patterns.sort_by_key(|p| std::cmp::Reverse(p.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for p in &self.patterns {
            if out.contains(p.as_str()) {
                out = out.replace(p.as_str(), MASK);
            }
        }
        out
    }

    /// Masks every string (and object key) inside a JSON document.
    pub fn mask_json(&self, v: &mut serde_json::Value) {
        use serde_json::Value;
        if self.patterns.is_empty() {
            return;
        }
        match v {
            Value::String(s) => *s = self.mask(s),
            Value::Array(a) => a.iter_mut().for_each(|x| self.mask_json(x)),
            Value::Object(o) => {
                let old = std::mem::take(o);
                for (k, mut x) in old {
                    self.mask_json(&mut x);
                    o.insert(self.mask(&k), x);
                }
            }
            _ => {}
        }
    }

    /// Length in bytes of the longest tail of `text` that is a proper prefix of a pattern:
    /// the part that must wait for more input before it can be sent.
    fn pending_tail(&self, text: &str) -> usize {
        let mut best = 0;
        for p in &self.patterns {
            let max = (p.len() - 1).min(text.len());
            for k in (best + 1..=max).rev() {
                if p.is_char_boundary(k) && text.is_char_boundary(text.len() - k) && text.ends_with(&p[..k]) {
                    best = k;
                    break;
                }
            }
        }
        best
    }
}

/// Masks a stream given in pieces. `push` returns what can be sent now; `finish` the rest.
#[derive(Debug, Default)]
pub struct StreamMasker {
    masker: Masker,
    held: String,
}

impl StreamMasker {
    pub fn new(masker: Masker) -> Self {
        Self {
            masker,
            held: String::new(),
        }
    }

    pub fn add_secret(&mut self, secret: &str) {
        self.masker.add(secret);
    }

    pub fn masker(&self) -> &Masker {
        &self.masker
    }

    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        let masked = self.masker.mask(&self.held);
        let keep = self.masker.pending_tail(&masked);
        let cut = masked.len() - keep;
        self.held = masked[cut..].to_owned();
        masked[..cut].to_owned()
    }

    pub fn finish(&mut self) -> String {
        self.masker.mask(&std::mem::take(&mut self.held))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: &str = "hunter2-canary/secret value";

    #[test]
    fn masks_value_and_encodings() {
        let m = Masker::new([S]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(S);
        let url = utf8_percent_encode(S, NON_ALPHANUMERIC).to_string();
        let form = url.replace("%20", "+");
        for text in [
            format!("x={S};"),
            format!("b={b64}"),
            format!("u={url}"),
            format!("f={form}"),
            format!("j={}", serde_json::to_string(S).unwrap_or_default()),
        ] {
            let out = m.mask(&text);
            assert!(out.contains(MASK), "{text} -> {out}");
            assert!(
                !out.contains("hunter2") && !out.contains(&b64) && !out.contains(&url),
                "{out}"
            );
        }
        assert_eq!(m.mask("nothing here"), "nothing here");
        assert!(Masker::new(["abc"]).is_empty(), "too short to mask");
    }

    #[test]
    fn masks_across_chunk_boundaries() {
        for split in 1..S.len() {
            let mut sm = StreamMasker::new(Masker::new([S]));
            let text = format!("before {S} after\n");
            let cut = "before ".len() + split;
            let mut out = sm.push(&text[..cut]);
            assert!(
                "before ".starts_with(&out),
                "nothing of the secret leaves early: {out:?}"
            );
            out.push_str(&sm.push(&text[cut..]));
            out.push_str(&sm.finish());
            assert_eq!(out, format!("before {MASK} after\n"), "split at {split}");
        }
    }

    #[test]
    fn stream_passes_plain_text_through() {
        let mut sm = StreamMasker::new(Masker::new(["secret-one"]));
        let a = sm.push("line one\nsec");
        assert_eq!(a, "line one\n", "a possible start of a secret waits");
        let b = sm.push("ond line\n");
        assert_eq!(b, "second line\n");
        assert_eq!(sm.finish(), "");
    }

    #[test]
    fn masks_json_strings_and_keys() {
        let m = Masker::new([S]);
        let mut v = serde_json::json!({"a": [S, {"k": format!("x{S}y")}], S: 1});
        m.mask_json(&mut v);
        let t = v.to_string();
        assert!(!t.contains("hunter2"), "{t}");
    }
}
