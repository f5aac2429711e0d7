//! The book's tables, made from committed results: every `<!-- table: ... -->` region of a
//! markdown file is the CSV it names, rendered as a markdown table.
//!
//! A region is two comment lines and what the tool writes between them:
//!
//! ```text
//! <!-- table: results/h200-matmul.csv; where: n=4096, product=A·B; columns: kernel=Kernel, tflops=TFLOP/s -->
//! | Kernel | TFLOP/s |
//! | --- | ---: |
//! | 01 | 1.5 |
//! <!-- end table -->
//! ```
//!
//! - the path is relative to the markdown file;
//! - `where:` keeps the rows whose cells equal the given values exactly;
//! - `columns:` picks and orders columns, `name=Header` renames one, and `@N` after either
//!   rounds its numbers to N decimals (`tflops=TFLOP/s@1`: a runner writes 6 significant
//!   digits, a table shows what matters); without it, every column;
//! - cells are copied verbatim (the CSV holds the figures as the table shows them); a column
//!   whose cells are all numbers is right-aligned;
//! - `{=other.csv[col=value&col=value].column}` inside a cell is a reference: the value of
//!   `column` in the one row of `other.csv` (relative to this CSV) that matches. The top
//!   README's headline table is made of such references, so a headline figure is the
//!   chapter's figure and cannot drift from it.
//!
//! `cargo run -p tables` rewrites every region in the repository; `--check` changes nothing and
//! fails when a committed region differs from what the results make (a test runs it).

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

const START: &str = "<!-- table:";
const END: &str = "<!-- end table -->";

/// What can go wrong, with the file and line it happened at.
#[derive(Debug)]
pub struct TableError(pub String);

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TableError {}

fn err(at: &str, what: impl fmt::Display) -> TableError {
    TableError(format!("{at}: {what}"))
}

/// One region's directive: `path; where: a=b, c=d; columns: x=Header, y`.
#[derive(Debug, PartialEq)]
pub struct Directive {
    pub path: String,
    pub filters: Vec<(String, String)>,
    pub columns: Option<Vec<Column>>,
}

/// One column of a `columns:` list: the CSV's column, the header to show (else the CSV's),
/// and the decimals to round its numbers to (else as written).
#[derive(Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub header: Option<String>,
    pub decimals: Option<usize>,
}

/// `text@N` -> (`text`, Some(N)); anything else -> (`text`, None).
fn split_decimals(text: &str) -> (&str, Option<usize>) {
    match text.rsplit_once('@') {
        Some((head, n)) if !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()) => (head, n.parse().ok()),
        _ => (text, None),
    }
}

/// A number rounded to `decimals`, or the cell unchanged when it is not a number.
fn rounded(cell: &str, decimals: Option<usize>) -> String {
    match (decimals, cell.trim().parse::<f64>()) {
        (Some(d), Ok(v)) if v.is_finite() => format!("{v:.d$}"),
        _ => cell.to_string(),
    }
}

impl Directive {
    /// Parses the text between `<!-- table:` and `-->`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.split("; ").map(str::trim);
        let path = parts.next().filter(|p| !p.is_empty()).ok_or("no CSV path after `table:`")?.to_string();
        let mut d = Directive { path, filters: Vec::new(), columns: None };
        for part in parts {
            if let Some(rest) = part.strip_prefix("where:") {
                for item in rest.split(", ").map(str::trim).filter(|s| !s.is_empty()) {
                    let (k, v) = item.split_once('=').ok_or_else(|| format!("`where: {item}` is not COLUMN=VALUE"))?;
                    d.filters.push((k.trim().to_string(), v.trim().to_string()));
                }
            } else if let Some(rest) = part.strip_prefix("columns:") {
                let cols = rest
                    .split(", ")
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(|item| {
                        let (item, decimals) = split_decimals(item);
                        match item.split_once('=') {
                            Some((k, h)) => Column { name: k.trim().to_string(), header: Some(h.trim().to_string()), decimals },
                            None => Column { name: item.to_string(), header: None, decimals },
                        }
                    })
                    .collect();
                d.columns = Some(cols);
            } else {
                return Err(format!("`{part}`: expected `where: ...` or `columns: ...`"));
            }
        }
        Ok(d)
    }
}

/// A CSV's header and rows, every cell a string.
pub struct Csv {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// Reads a CSV file (RFC 4180 quoting, through the `csv` crate) and resolves its reference
/// cells; every row must have the header's number of cells.
pub fn read_csv(path: &Path) -> Result<Csv, TableError> {
    read_csv_depth(path, 0)
}

fn read_csv_depth(path: &Path, depth: usize) -> Result<Csv, TableError> {
    let mut csv = read_plain_csv(path)?;
    let at = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new("."));
    for row in &mut csv.rows {
        for cell in row.iter_mut() {
            while let Some(start) = cell.find("{=") {
                let end = cell[start..].find('}').map(|i| start + i).ok_or_else(|| err(&at, format!("`{cell}`: a reference `{{=...` has no closing `}}`")))?;
                let value = resolve_reference(dir, &cell[start + 2..end], depth).map_err(|e| err(&at, format!("`{cell}`: {e}")))?;
                cell.replace_range(start..=end, &value);
            }
        }
    }
    Ok(csv)
}

/// `path.csv[a=1&b=2].column` (the inside of `{=...}`) -> that cell's value.
fn resolve_reference(dir: &Path, body: &str, depth: usize) -> Result<String, String> {
    if depth > 4 {
        return Err("references nested more than 4 deep".into());
    }
    let open = body.find('[').ok_or("a reference is `=file.csv[col=value&...].column`")?;
    let close = body[open..].find("].").map(|i| open + i).ok_or("a reference is `=file.csv[col=value&...].column`")?;
    let file = &body[..open];
    let filters: Vec<(&str, &str)> = body[open + 1..close]
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|f| f.split_once('=').ok_or_else(|| format!("`{f}` is not COLUMN=VALUE")))
        .collect::<Result<_, _>>()?;
    let (column, decimals) = split_decimals(&body[close + 2..]);
    let other = read_csv_depth(&dir.join(file), depth + 1).map_err(|e| e.to_string())?;
    let index = |name: &str| other.header.iter().position(|h| h == name).ok_or_else(|| format!("{file} has no column `{name}`"));
    let col = index(column)?;
    let mut keys = Vec::new();
    for (k, v) in &filters {
        keys.push((index(k)?, *v));
    }
    let rows: Vec<&Vec<String>> = other.rows.iter().filter(|r| keys.iter().all(|(i, v)| r[*i] == *v)).collect();
    match rows.as_slice() {
        [row] => Ok(rounded(&row[col], decimals)),
        [] => Err(format!("no row of {file} matches")),
        _ => Err(format!("{} rows of {file} match; a reference needs exactly one", rows.len())),
    }
}

fn read_plain_csv(path: &Path) -> Result<Csv, TableError> {
    let at = path.display().to_string();
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_path(path).map_err(|e| err(&at, e))?;
    let header: Vec<String> = reader.headers().map_err(|e| err(&at, e))?.iter().map(str::to_string).collect();
    let mut rows = Vec::new();
    for rec in reader.records() {
        let rec = rec.map_err(|e| err(&at, e))?;
        rows.push(rec.iter().map(str::to_string).collect());
    }
    Ok(Csv { header, rows })
}

fn is_number(cell: &str) -> bool {
    let t = cell.trim().trim_end_matches('%').replace(',', "");
    !t.is_empty() && t.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Markdown for a directive over a CSV (no trailing newline).
pub fn render(d: &Directive, csv: &Csv) -> Result<String, String> {
    let index = |name: &str| csv.header.iter().position(|h| h == name).ok_or_else(|| format!("no column `{name}` (columns: {})", csv.header.join(", ")));
    let mut filters = Vec::new();
    for (k, v) in &d.filters {
        filters.push((index(k)?, v.as_str()));
    }
    let picked: Vec<(usize, String, Option<usize>)> = match &d.columns {
        Some(cols) => cols.iter().map(|c| Ok((index(&c.name)?, c.header.clone().unwrap_or_else(|| c.name.clone()), c.decimals))).collect::<Result<_, String>>()?,
        None => csv.header.iter().cloned().enumerate().map(|(i, h)| (i, h, None)).collect(),
    };
    let rows: Vec<&Vec<String>> = csv.rows.iter().filter(|r| filters.iter().all(|(i, v)| r[*i] == *v)).collect();
    if rows.is_empty() {
        return Err("no row matches the `where:` filter".into());
    }
    let escape = |s: &str| s.replace('|', "\\|");
    let mut out = String::new();
    out.push_str(&format!("| {} |\n", picked.iter().map(|(_, h, _)| escape(h)).collect::<Vec<_>>().join(" | ")));
    let aligns: Vec<&str> = picked
        .iter()
        .map(|(i, _, _)| {
            let cells: Vec<&str> = rows.iter().map(|r| r[*i].as_str()).filter(|c| !c.trim().is_empty()).collect();
            if !cells.is_empty() && cells.iter().all(|c| is_number(c)) { "---:" } else { "---" }
        })
        .collect();
    out.push_str(&format!("| {} |", aligns.join(" | ")));
    for r in rows {
        out.push_str(&format!("\n| {} |", picked.iter().map(|(i, _, n)| escape(&rounded(&r[*i], *n))).collect::<Vec<_>>().join(" | ")));
    }
    Ok(out)
}

/// One markdown file with every region filled from its CSV. `Ok(None)`: no regions.
pub fn fill(md_path: &Path, text: &str) -> Result<Option<String>, TableError> {
    if !text.contains(START) {
        return Ok(None);
    }
    let dir = md_path.parent().unwrap_or(Path::new("."));
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        // Only a line that is the directive alone starts a region (a mention inside prose or
        // a code span does not).
        if trimmed.starts_with(START) && trimmed.ends_with("-->") {
            let at = format!("{}:{}", md_path.display(), i + 1);
            let body = &trimmed[START.len()..trimmed.len() - 3];
            let d = Directive::parse(body).map_err(|e| err(&at, e))?;
            let end = (i + 1..lines.len()).find(|&j| lines[j].trim() == END).ok_or_else(|| err(&at, format!("no `{END}` after this region")))?;
            let csv = read_csv(&dir.join(&d.path)).map_err(|e| err(&at, e))?;
            let table = render(&d, &csv).map_err(|e| err(&at, format!("{}: {e}", d.path)))?;
            out.push(line.to_string());
            out.push(table);
            out.push(lines[end].to_string());
            i = end + 1;
        } else {
            out.push(line.to_string());
            i += 1;
        }
    }
    Ok(Some(out.join("\n")))
}

/// Every markdown file under `root` (not in `target/`, `node_modules/` or hidden folders).
pub fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() {
                if !name.starts_with('.') && name != "target" && name != "node_modules" && name != "book-out" {
                    stack.push(p);
                }
            } else if name.ends_with(".md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The files whose regions differ from what their CSVs make, with the text they should have.
pub fn stale(root: &Path) -> Result<Vec<(PathBuf, String)>, TableError> {
    let mut out = Vec::new();
    for md in markdown_files(root) {
        let text = fs::read_to_string(&md).map_err(|e| err(&md.display().to_string(), e))?;
        if let Some(new) = fill(&md, &text)? {
            if new != text {
                out.push((md, new));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv() -> Csv {
        Csv {
            header: ["kernel", "n", "tflops", "note"].map(String::from).to_vec(),
            rows: vec![
                ["01", "4096", "1.5", "naive"].map(String::from).to_vec(),
                ["02", "4096", "2.7", "a | b"].map(String::from).to_vec(),
                ["02", "2048", "2.5", ""].map(String::from).to_vec(),
            ],
        }
    }

    #[test]
    fn a_directive_parses_its_filters_and_columns() {
        let d = Directive::parse(" results/x.csv; where: n=4096; columns: kernel=Kernel, tflops ").unwrap();
        assert_eq!(d.path, "results/x.csv");
        assert_eq!(d.filters, vec![("n".to_string(), "4096".to_string())]);
        let col = |name: &str, header: Option<&str>, decimals| Column { name: name.into(), header: header.map(String::from), decimals };
        assert_eq!(d.columns, Some(vec![col("kernel", Some("Kernel"), None), col("tflops", None, None)]));
        let d = Directive::parse("x.csv; columns: tflops=TFLOP/s@1, ms@2").unwrap();
        assert_eq!(d.columns, Some(vec![col("tflops", Some("TFLOP/s"), Some(1)), col("ms", None, Some(2))]));
        assert!(Directive::parse("x.csv; sort: n").is_err());
        assert!(Directive::parse("x.csv; where: n").is_err());
    }

    #[test]
    fn a_table_keeps_the_filtered_rows_and_aligns_numbers_right() {
        let d = Directive::parse("x.csv; where: n=4096; columns: kernel=Kernel, tflops=TFLOP/s, note").unwrap();
        let t = render(&d, &csv()).unwrap();
        assert_eq!(t, "| Kernel | TFLOP/s | note |\n| ---: | ---: | --- |\n| 01 | 1.5 | naive |\n| 02 | 2.7 | a \\| b |");
    }

    #[test]
    fn numbers_are_rounded_where_asked_and_words_kept() {
        assert_eq!(rounded("39.91234", Some(1)), "39.9");
        assert_eq!(rounded("79.6", Some(0)), "80");
        assert_eq!(rounded("n/a", Some(1)), "n/a");
        assert_eq!(rounded("39.91234", None), "39.91234");
    }

    #[test]
    fn an_unknown_column_or_an_empty_selection_is_an_error() {
        assert!(render(&Directive::parse("x.csv; columns: gflops").unwrap(), &csv()).unwrap_err().contains("no column `gflops`"));
        assert!(render(&Directive::parse("x.csv; where: n=1").unwrap(), &csv()).is_err());
    }

    #[test]
    fn a_region_is_filled_and_text_around_it_kept() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("r.csv"), "a,b\n1,x\n").unwrap();
        let md = dir.path().join("c.md");
        let text = "intro\n<!-- table: r.csv -->\nold\n<!-- end table -->\nafter\n";
        let filled = fill(&md, text).unwrap().unwrap();
        assert_eq!(filled, "intro\n<!-- table: r.csv -->\n| a | b |\n| ---: | --- |\n| 1 | x |\n<!-- end table -->\nafter\n");
        assert_eq!(fill(&md, &filled).unwrap().unwrap(), filled, "filling is idempotent");
        assert!(fill(&md, "<!-- table: r.csv -->\nno end\n").is_err());
        assert!(fill(&md, "<!-- table: missing.csv -->\n<!-- end table -->\n").is_err());
    }

    #[test]
    fn a_reference_cell_is_the_cell_it_names() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("stage.csv"), "kernel,n,tflops\n05,4096,39.9\n05,2048,35.0\n").unwrap();
        fs::write(dir.path().join("head.csv"), "what,figure\nkernel 05,{=stage.csv[kernel=05&n=4096].tflops} TFLOP/s (n = {=stage.csv[kernel=05&n=4096].n})\n").unwrap();
        let csv = read_csv(&dir.path().join("head.csv")).unwrap();
        assert_eq!(csv.rows[0][1], "39.9 TFLOP/s (n = 4096)");
        for bad in ["{=stage.csv[kernel=05].tflops}", "{=stage.csv[kernel=06].tflops}", "{=stage.csv[n=4096].gflops}", "{=stage.csv.tflops}", "{=stage.csv[n=4096].tflops"] {
            fs::write(dir.path().join("bad.csv"), format!("what,figure\nx,{bad}\n")).unwrap();
            assert!(read_csv(&dir.path().join("bad.csv")).is_err(), "{bad} should be refused");
        }
    }
}
