//! Suite files: the YAML format, its validation and its diagnostics.
//!
//! Loading goes text → located YAML tree ([`node`]) → validated model
//! ([`model`]) by the decoder, which collects every problem of the file with
//! its line and column ([`diagnostics`]).

pub mod dataset;
mod decode;
pub mod diagnostics;
pub mod figures;
pub mod image;
pub mod interpolate;
pub mod load;
pub mod metric;
pub mod model;
pub mod names;
pub mod node;
pub mod threshold;
mod tokenizer;

pub use decode::schema::{key_reference, schema};
pub use load::{
    LoadFailure, absolute, discover, load_file, load_file_with_env, load_text, project_root,
};
pub use model::*;
