//! Nomad HCL job files into the typed model. The HCL is read with `hcl-edit` (which keeps
//! source spans), turned into the Nomad API JSON shape, and checked by the same code as API
//! jobs; an error is reported with the HCL path (`job.group[0].task[1].resources.memory`)
//! and the line it is on.
//!
//! Runtime interpolations (`${NOMAD_*}`, `${attr.*}`, `${node.*}`, `${meta.*}`) are kept as
//! written, for the client to resolve, as Nomad's jobspec2 does. `variable` blocks (with
//! `-var` values over their defaults) and `locals` are resolved here, as attribute values
//! (`count = var.n`) and inside strings (`"${var.region}-web"`); HCL functions and operators
//! are not supported yet: such an expression is an error naming its place.

use std::collections::BTreeMap;
use std::ops::Range;

use hcl::edit::Span;
use hcl::edit::structure::{Block, BlockLabel};
use serde_json::Value;

use super::{Job, JobspecError};

mod blocks;
pub(crate) mod depth;
mod kept;
mod vars;

pub use vars::parse_var_file;

type R<T> = Result<T, JobspecError>;

/// A block of plain attributes: HCL name, Nomad JSON key, attribute renames.
struct BlockSpec {
    hcl: &'static str,
    json: &'static str,
    fields: &'static [(&'static str, &'static str)],
}

const RESTART: BlockSpec = BlockSpec {
    hcl: "restart",
    json: "RestartPolicy",
    fields: &[
        ("attempts", "Attempts"),
        ("interval", "Interval"),
        ("delay", "Delay"),
        ("mode", "Mode"),
        ("render_templates", "RenderTemplates"),
    ],
};

/// Plain blocks inside a `group`.
const GROUP_BLOCKS: &[BlockSpec] = &[
    RESTART,
    BlockSpec {
        hcl: "ephemeral_disk",
        json: "EphemeralDisk",
        fields: &[
            ("size", "SizeMB"),
            ("sticky", "Sticky"),
            ("migrate", "Migrate"),
        ],
    },
];

/// Plain blocks inside a `task`.
const TASK_BLOCKS: &[BlockSpec] = &[
    RESTART,
    BlockSpec {
        hcl: "logs",
        json: "LogConfig",
        fields: &[
            ("max_files", "MaxFiles"),
            ("max_file_size", "MaxFileSizeMB"),
            ("disabled", "Disabled"),
        ],
    },
    BlockSpec {
        hcl: "lifecycle",
        json: "Lifecycle",
        fields: &[("hook", "Hook"), ("sidecar", "Sidecar")],
    },
    BlockSpec {
        hcl: "dispatch_payload",
        json: "DispatchPayload",
        fields: &[("file", "File")],
    },
];

/// Plain blocks inside a `job`.
const JOB_BLOCKS: &[BlockSpec] = &[
    BlockSpec {
        hcl: "periodic",
        json: "Periodic",
        fields: &[
            ("enabled", "Enabled"),
            ("cron", "Spec"),
            ("crons", "Specs"),
            ("prohibit_overlap", "ProhibitOverlap"),
            ("time_zone", "TimeZone"),
        ],
    },
    BlockSpec {
        hcl: "parameterized",
        json: "ParameterizedJob",
        fields: &[
            ("payload", "Payload"),
            ("meta_required", "MetaRequired"),
            ("meta_optional", "MetaOptional"),
        ],
    },
];

/// A `template` block's attributes (blocks `wait` and `change_script` are ignored).
const TEMPLATE_FIELDS: &[(&str, &str)] = &[
    ("source", "SourcePath"),
    ("destination", "DestPath"),
    ("data", "EmbeddedTmpl"),
    ("change_mode", "ChangeMode"),
    ("change_signal", "ChangeSignal"),
    ("perms", "Perms"),
    ("left_delimiter", "LeftDelim"),
    ("right_delimiter", "RightDelim"),
    ("env", "Envvars"),
    ("error_on_missing_key", "ErrMissingKey"),
    ("splay", "Splay"),
    ("uid", "Uid"),
    ("gid", "Gid"),
    ("once", "Once"),
];

fn spec<'a>(specs: &'a [BlockSpec], b: &Block) -> Option<&'a BlockSpec> {
    specs.iter().find(|s| s.hcl == b.ident.as_str())
}

/// One HCL place: its HCL path and byte span, by the JSON path it became.
struct Place {
    json: String,
    hcl: String,
    span: Option<Range<usize>>,
}

struct Conv<'a> {
    src: &'a str,
    places: Vec<Place>,
    /// `var.*` and `local.*` values by their full name (`var.region`).
    values: BTreeMap<String, Value>,
}

/// Parse a Nomad HCL job file.
pub fn parse_job_hcl(src: &str) -> R<Job> {
    parse_job_hcl_with_vars(src, &BTreeMap::new())
}

/// Parse a Nomad HCL job file with variable values (`-var name=value`), which override the
/// `variable` blocks' defaults. A value is read as HCL when it parses as a literal (`3`,
/// `true`, `["a"]`) and as a string otherwise, as Nomad's `-var` does.
pub fn parse_job_hcl_with_vars(src: &str, vars: &BTreeMap<String, String>) -> R<Job> {
    parse_job_hcl_with_env(src, vars, &BTreeMap::new())
}

/// [`parse_job_hcl_with_vars`], with `env` values (the `NOMAD_VAR_<name>` environment, name
/// without the prefix) under `vars` for the variables the file declares.
pub fn parse_job_hcl_with_env(
    src: &str,
    vars: &BTreeMap<String, String>,
    env: &BTreeMap<String, String>,
) -> R<Job> {
    depth::check(src).map_err(|(line, _)| {
        JobspecError::new(
            "job",
            format!(
                "invalid HCL: line {line}: brackets nest more than {} deep",
                depth::MAX_DEPTH
            ),
        )
    })?;
    let body = hcl::edit::parser::parse_body(src)
        .map_err(|e| JobspecError::new("job", format!("invalid HCL: {e}")))?;
    let mut conv = Conv {
        src,
        places: Vec::new(),
        values: BTreeMap::new(),
    };
    conv.variables(&body, vars, env)?;
    let jobs: Vec<&Block> = body
        .iter()
        .filter_map(|s| s.as_block())
        .filter(|b| b.ident.as_str() == "job")
        .collect();
    let job = match jobs.as_slice() {
        [one] => *one,
        [] => {
            return Err(JobspecError::new(
                "job",
                "the file has no `job \"<id>\" { ... }` block",
            ));
        }
        [_, second, ..] => return Err(conv.err_at("job", second.span(), "only one job per file")),
    };
    let value = conv.job(job)?;
    super::json::job_from_value(&value).map_err(|e| conv.translate(e))
}

fn line_of(src: &str, offset: usize) -> usize {
    src[..offset.min(src.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

fn label(b: &Block) -> Option<String> {
    b.labels.first().map(|l| match l {
        BlockLabel::String(s) => s.value().to_string(),
        BlockLabel::Ident(i) => i.as_str().to_string(),
    })
}

impl Conv<'_> {
    fn err_at(
        &self,
        hcl: &str,
        span: Option<Range<usize>>,
        msg: impl Into<String>,
    ) -> JobspecError {
        let path = match span {
            Some(s) => format!("{hcl} (line {})", line_of(self.src, s.start)),
            None => hcl.to_string(),
        };
        JobspecError::new(path, msg)
    }

    fn place(&mut self, json: String, hcl: String, span: Option<Range<usize>>) {
        self.places.push(Place { json, hcl, span });
    }

    /// Turn a JSON-layer error back into the HCL path and line of the field.
    fn translate(&self, e: JobspecError) -> JobspecError {
        if let Some(p) = self.places.iter().find(|p| p.json == e.path) {
            return self.err_at(&p.hcl, p.span.clone(), e.message);
        }
        // A missing field: name it under its nearest recorded parent.
        let mut parent = e.path.as_str();
        while let Some((head, _)) = parent.rsplit_once('.') {
            if let Some(p) = self.places.iter().find(|p| p.json == head) {
                let leaf = hcl_name(&e.path[head.len() + 1..]);
                return self.err_at(&format!("{}.{leaf}", p.hcl), p.span.clone(), e.message);
            }
            parent = head;
        }
        e
    }
}

/// The HCL name of a Nomad JSON field, for naming a missing field.
fn hcl_name(json_field: &str) -> String {
    let table = [
        ("ID", "id"),
        ("Name", "name"),
        ("Driver", "driver"),
        ("TaskGroups", "group"),
        ("Tasks", "task"),
        ("MemoryMB", "memory"),
        ("MemoryMaxMB", "memory_max"),
        ("CPU", "cpu"),
        ("Hook", "hook"),
        ("Count", "count"),
    ];
    table
        .iter()
        .copied()
        .chain(TEMPLATE_FIELDS.iter().map(|&(h, j)| (j, h)))
        .find(|(j, _)| *j == json_field)
        .map(|(_, h)| h.to_string())
        .unwrap_or_else(|| json_field.to_lowercase())
}

#[cfg(test)]
mod kept_tests;
#[cfg(test)]
mod tests;
