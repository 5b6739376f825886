//! Turning Rego source into a [`Policy`]: syntax detection (v0/v1), parsing, and the checks
//! Spacelift makes before it accepts a policy (package `spacelift`, no disabled builtins).

use std::fmt;

use regorus::Engine;
use serde_json::Value;

use crate::PolicyType;
use crate::builtins;

/// Why Rego source was refused, with the 1-based position it points at (0 when regorus gave none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// What is wrong, without the position.
    pub message: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for CompileError {}

/// Which Rego dialect a policy is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syntax {
    /// Rego v0: `deny[msg] { … }` (what most Spacelift policies use).
    V0,
    /// Rego v1: `deny contains msg if { … }`, or any policy with `import rego.v1`.
    V1,
}

/// A compiled, validated policy. Cloning the prepared engine per evaluation is cheap, so one
/// `Policy` can be evaluated many times, from many threads.
#[derive(Clone)]
pub struct Policy {
    name: String,
    syntax: Syntax,
    engine: Engine,
    /// The rules of any policy type (and the common ones) that this policy declares.
    declared: Vec<&'static str>,
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("syntax", &self.syntax)
            .field("declared", &self.declared)
            .finish_non_exhaustive()
    }
}

/// The Spacelift plan aliases, each added unless the policy declares a rule of that name.
const ALIASES: [(&str, &str); 5] = [
    (
        "affected_resources",
        r#"affected_resources := [r | some r in input.terraform.resource_changes; effects := {a | some a in r.change.actions; a in {"create", "update", "delete"}}; count(effects) > 0]"#,
    ),
    (
        "created_resources",
        r#"created_resources := [r | some r in input.terraform.resource_changes; "create" in r.change.actions]"#,
    ),
    (
        "deleted_resources",
        r#"deleted_resources := [r | some r in input.terraform.resource_changes; "delete" in r.change.actions]"#,
    ),
    (
        "recreated_resources",
        r#"recreated_resources := [r | some r in input.terraform.resource_changes; "create" in r.change.actions; "delete" in r.change.actions]"#,
    ),
    (
        "updated_resources",
        r#"updated_resources := [r | some r in input.terraform.resource_changes; "update" in r.change.actions]"#,
    ),
];

/// The file name the aliases module is registered under (it appears in error messages).
const ALIASES_FILE: &str = "<terraplane>/aliases.rego";

impl Policy {
    /// Parses and checks Rego source in v0 or v1 syntax.
    ///
    /// The syntax is detected: `import rego.v1`, or `if` / `contains` used as keywords without
    /// `import future.keywords…`, means v1; anything else is parsed as v0 first. If the detected
    /// syntax does not parse but the other one does, the other one is used.
    ///
    /// Refuses syntax errors (at the position regorus reports), a package other than
    /// `spacelift`, and calls to the builtins Spacelift disables (`http.send`, `opa.runtime`,
    /// `rego.parse_module`, `time.now_ns`, `trace`), at the position of the call.
    pub fn compile(name: &str, source: &str) -> Result<Policy, CompileError> {
        let detected = detect_syntax(source);
        let (syntax, mut engine, package) = match parse(name, source, detected) {
            Ok((engine, package)) => (detected, engine, package),
            Err(first) => {
                let other = match detected {
                    Syntax::V0 => Syntax::V1,
                    Syntax::V1 => Syntax::V0,
                };
                match parse(name, source, other) {
                    Ok((engine, package)) => (other, engine, package),
                    Err(_) => return Err(first),
                }
            }
        };

        let ast = engine
            .get_ast_as_json()
            .ok()
            .and_then(|json| serde_json::from_str::<Value>(&json).ok())
            .and_then(|mut all| all.get_mut(0).map(|policy| policy["ast"].take()))
            .ok_or_else(|| CompileError {
                message: "could not read the parsed policy".into(),
                line: 0,
                column: 0,
            })?;

        if package != "data.spacelift" {
            let offset = span_start(&ast["package"]).unwrap_or(0);
            let (line, column) = line_col(source, offset);
            let found = package.strip_prefix("data.").unwrap_or(&package);
            return Err(CompileError {
                message: format!("policies must be in package \"spacelift\", not \"{found}\""),
                line,
                column,
            });
        }

        let mut calls = Vec::new();
        disabled_calls(&ast, source, &mut calls);
        if let Some((offset, builtin)) = calls.into_iter().min_by_key(|(offset, _)| *offset) {
            let (line, column) = line_col(source, offset);
            return Err(CompileError {
                message: builtins::disabled_reason(builtin),
                line,
                column,
            });
        }

        if let Some(rewritten) = rewrite_negations(&ast, source) {
            // Same syntax, same line numbers: only `not` statements changed (see below).
            engine = parse(name, &rewritten, syntax)?.0;
        }

        let declared: Vec<&'static str> = all_rule_names()
            .into_iter()
            .filter(|rule| engine.has_declared_rule_rooted_at(name, rule).unwrap_or(false))
            .collect();

        let aliases: Vec<&str> = ALIASES
            .iter()
            .filter(|(alias, _)| !engine.has_declared_rule_rooted_at(name, alias).unwrap_or(false))
            .map(|(_, rule)| *rule)
            .collect();
        if !aliases.is_empty() {
            let module = format!("package spacelift\n\n{}\n", aliases.join("\n\n"));
            engine.set_rego_v0(false);
            engine
                .add_policy(ALIASES_FILE.into(), module)
                .map_err(|e| regorus_error(&e))?;
        }

        // Analyses the modules now, so evaluations clone a prepared engine and an unsound
        // policy is refused here rather than at its first run.
        engine.eval_query("true".into(), false).map_err(|e| regorus_error(&e))?;

        Ok(Policy {
            name: name.to_string(),
            syntax,
            engine,
            declared,
        })
    }

    /// The name the policy was compiled under (used in error positions).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The Rego dialect the policy was parsed as.
    pub fn syntax(&self) -> Syntax {
        self.syntax
    }

    /// Whether the policy declares `rule` (one of the names in [`PolicyType::rules`]).
    pub fn declares(&self, rule: &str) -> bool {
        self.declared.contains(&rule)
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }
}

fn all_rule_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = PolicyType::ALL.iter().flat_map(|t| t.rules().iter().copied()).collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn parse(name: &str, source: &str, syntax: Syntax) -> Result<(Engine, String), CompileError> {
    let mut engine = Engine::new();
    engine.set_rego_v0(syntax == Syntax::V0);
    builtins::register(&mut engine).map_err(|e| regorus_error(&e))?;
    let package = engine
        .add_policy(name.to_string(), source.to_string())
        .map_err(|e| regorus_error(&e))?;
    Ok((engine, package))
}

/// Turns regorus's error text (`\n--> file:L:C\n … \nerror: message`) into a [`CompileError`].
pub(crate) fn regorus_error(err: &anyhow::Error) -> CompileError {
    let text = err.to_string();
    let (line, column, message) = split_location(&text);
    CompileError { message, line, column }
}

/// Splits regorus's located error text into line, column and message.
pub(crate) fn split_location(text: &str) -> (u32, u32, String) {
    let Some(arrow) = text.find("--> ") else {
        return (0, 0, text.trim().to_string());
    };
    let after = &text[arrow + 4..];
    let location = after.lines().next().unwrap_or("");
    let mut parts = location.rsplitn(3, ':');
    let column = parts.next().and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    let line = parts.next().and_then(|l| l.trim().parse().ok()).unwrap_or(0);
    let message = match after.find("\nerror: ") {
        Some(i) => after[i + "\nerror: ".len()..].trim().to_string(),
        None => text.trim().to_string(),
    };
    (line, column, message)
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(source: &str, offset: usize) -> (u32, u32) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(column).unwrap_or(u32::MAX),
    )
}

/// The start offset of an AST node serialized as `{"Variant": {"span": {...}, ...}}` (or as the
/// inner object itself).
fn span_start(node: &Value) -> Option<usize> {
    let span = node
        .get("span")
        .or_else(|| node.as_object()?.values().next()?.get("span"))?;
    usize::try_from(span.get("start")?.as_u64()?).ok()
}

fn span_text<'a>(node: &Value, source: &'a str) -> Option<&'a str> {
    let span = node.as_object()?.values().next()?.get("span")?;
    let start = usize::try_from(span.get("start")?.as_u64()?).ok()?;
    let end = usize::try_from(span.get("end")?.as_u64()?).ok()?;
    source.get(start..end)
}

/// Collects `(offset, builtin)` for every use of a disabled builtin in the AST: calls, and
/// references such as `with f as time.now_ns` that would call it indirectly. The target of a
/// `with` (`with time.now_ns as 0`) replaces the builtin and is allowed.
fn disabled_calls(node: &Value, source: &str, found: &mut Vec<(usize, &'static str)>) {
    match node {
        Value::Object(map) => {
            let mut check = |expr: &Value| {
                let Some(text) = span_text(expr, source) else { return };
                let used: String = text.chars().filter(|c| !c.is_whitespace()).collect();
                if let Some((builtin, _)) = builtins::DISABLED.iter().find(|(name, _)| *name == used) {
                    found.push((span_start(expr).unwrap_or(0), builtin));
                }
            };
            if let Some(fcn) = map.get("Call").and_then(|call| call.get("fcn")) {
                check(fcn);
            }
            if map.contains_key("RefDot") {
                check(node);
            }
            let is_with = map.contains_key("as") && map.contains_key("refr");
            map.iter()
                .filter(|(key, _)| !(is_with && key.as_str() == "refr"))
                .for_each(|(_, v)| disabled_calls(v, source, found));
        }
        Value::Array(items) => items.iter().for_each(|v| disabled_calls(v, source, found)),
        _ => {}
    }
}

/// Rewrites `not <expr>` into `count([1 | <expr>]) == 0` when `<expr>` iterates with `_`.
///
/// In OPA, `not contains(labels[_], "env:prod")` holds when *no* label contains `env:prod`
/// (the wildcard is quantified inside the negation). regorus 0.14 hoists the iteration out of
/// the `not` and tests each label separately, so with labels `["team:x", "env:prod"]` it holds,
/// and with no labels at all it does not — the opposite of OPA on both counts, which breaks
/// policies such as the product's `cost-control.rego`. A comprehension keeps the iteration
/// inside, and "no binding makes it true" is exactly OPA's meaning of the negation.
///
/// Edits stay on the lines they start on, so line numbers of errors are unchanged (columns
/// after a rewritten `not` on the same line shift). Returns `None` when nothing needs it.
fn rewrite_negations(ast: &Value, source: &str) -> Option<String> {
    let mut edits: Vec<(usize, usize, &str)> = Vec::new();
    collect_negations(ast, source, &mut edits);
    if edits.is_empty() {
        return None;
    }
    edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    let mut out = source.to_string();
    for (start, end, text) in edits {
        out.replace_range(start..end, text);
    }
    Some(out)
}

fn collect_negations(node: &Value, source: &str, edits: &mut Vec<(usize, usize, &'static str)>) {
    match node {
        Value::Object(map) => {
            if let Some(not) = map.get("NotExpr")
                && let Some(expr) = not.get("expr")
                && has_wildcard(expr)
                && let Some(start) = not.get("span").and_then(|s| s.get("start")).and_then(Value::as_u64)
                && let Ok(start) = usize::try_from(start)
                && source.get(start..start + 3) == Some("not")
                && let Some(end) = expr_end(expr, source)
            {
                edits.push((start, start + 3, "count([1 |"));
                edits.push((end, end, "]) == 0"));
            }
            map.values().for_each(|v| collect_negations(v, source, edits));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_negations(v, source, edits)),
        _ => {}
    }
}

/// Whether an expression iterates with `_` outside any comprehension of its own.
fn has_wildcard(node: &Value) -> bool {
    match node {
        Value::Object(map) => {
            if ["ArrayCompr", "SetCompr", "ObjectCompr"]
                .iter()
                .any(|k| map.contains_key(*k))
            {
                return false;
            }
            if let Some(var) = map.get("Var")
                && var.get("value").and_then(Value::as_str) == Some("_")
            {
                return true;
            }
            map.values().any(has_wildcard)
        }
        Value::Array(items) => items.iter().any(has_wildcard),
        _ => false,
    }
}

/// The byte offset just past an expression: the furthest span end in it, moved past the closing
/// quote when that is a string (regorus's string spans cover the contents only).
fn expr_end(expr: &Value, source: &str) -> Option<usize> {
    fn furthest(node: &Value, best: &mut Option<(u64, bool)>) {
        match node {
            Value::Object(map) => {
                for (key, value) in map {
                    if let Some(end) = value.get("span").and_then(|s| s.get("end")).and_then(Value::as_u64) {
                        let is_string = key == "String" || key == "RawString";
                        if best.is_none_or(|(b, _)| end > b || (end == b && is_string)) {
                            *best = Some((end, is_string));
                        }
                    }
                    furthest(value, best);
                }
            }
            Value::Array(items) => items.iter().for_each(|v| furthest(v, best)),
            _ => {}
        }
    }
    let mut best = None;
    furthest(expr, &mut best);
    let (end, is_string) = best?;
    let mut end = usize::try_from(end).ok()?;
    if is_string && matches!(source.as_bytes().get(end), Some(b'"' | b'`')) {
        end += 1;
    }
    source.is_char_boundary(end).then_some(end)
}

/// Guesses the dialect from the tokens outside comments and strings.
fn detect_syntax(source: &str) -> Syntax {
    let tokens = identifiers(source);
    let words: Vec<&str> = tokens.iter().map(|t| t.text).collect();
    let has_import = |path: &[&str]| {
        words
            .windows(path.len() + 1)
            .any(|w| w[0] == "import" && w[1..] == *path)
    };
    if has_import(&["rego", "v1"]) {
        return Syntax::V1;
    }
    if has_import(&["future", "keywords"]) {
        // v0 with opted-in keywords; regorus's v0 parser understands these imports.
        return Syntax::V0;
    }
    let keyword = tokens
        .iter()
        .any(|t| !t.after_dot && (t.text == "if" || (t.text == "contains" && !t.before_paren)));
    if keyword { Syntax::V1 } else { Syntax::V0 }
}

struct Token<'a> {
    text: &'a str,
    /// Preceded by `.`: a field name such as `input.if`, not a keyword.
    after_dot: bool,
    /// Followed by `(`: a call such as v0's `contains(s, "x")`, not a keyword.
    before_paren: bool,
}

fn identifiers(source: &str) -> Vec<Token<'_>> {
    let bytes = source.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    let mut last_significant = b' ';
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
                last_significant = b'"';
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
                i += 1;
                last_significant = b'`';
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let next = bytes[i..].iter().find(|b| !b.is_ascii_whitespace()).copied();
                tokens.push(Token {
                    text: &source[start..i],
                    after_dot: last_significant == b'.',
                    before_paren: next == Some(b'('),
                });
                last_significant = b'a';
            }
            c => {
                if !c.is_ascii_whitespace() {
                    last_significant = c;
                }
                i += 1;
            }
        }
    }
    tokens
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn detects_v1_from_keywords_and_the_rego_v1_import() {
        assert_eq!(
            detect_syntax("package spacelift\nimport rego.v1\ndeny[x] { x := 1 }"),
            Syntax::V1
        );
        assert_eq!(
            detect_syntax("package spacelift\ndeny contains msg if { msg := \"a\" }"),
            Syntax::V1
        );
        assert_eq!(detect_syntax("package spacelift\nallow if input.x"), Syntax::V1);
    }

    #[test]
    fn v0_calls_of_contains_and_keywords_in_strings_stay_v0() {
        let src = "package spacelift\n# if this, contains that\ndeny[msg] {\n  contains(input.x, \"if\")\n  input.if\n  msg := \"contains if\"\n}";
        assert_eq!(detect_syntax(src), Syntax::V0);
        assert_eq!(
            detect_syntax("package spacelift\nimport future.keywords.if\nallow if { true }"),
            Syntax::V0
        );
    }

    #[test]
    fn line_col_counts_characters() {
        let src = "ab\nçd x";
        assert_eq!(line_col(src, 0), (1, 1));
        assert_eq!(line_col(src, 3), (2, 1));
        assert_eq!(line_col(src, src.find('x').unwrap()), (2, 4));
    }

    #[test]
    fn regorus_locations_are_split_out() {
        let text = "\n--> my:policy.rego:3:11\n  |\n3 | deny[msg] {\n  |           ^\nerror: expecting }";
        assert_eq!(split_location(text), (3, 11, "expecting }".to_string()));
        assert_eq!(split_location("plain"), (0, 0, "plain".to_string()));
    }
}
