//! The transform's error: a file it does not read (store it as it is), or a side info or
//! content that does not rebuild the file (a corrupt patch).

/// Why a step of the compressed-asset transform stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompressedError {
    /// The file is not one the transform reads (another container, a deflate stream preflate
    /// cannot describe in bounds, bytes after the stream): diff it as plain bytes.
    #[error("not a compressed file the transform reads: {0}")]
    NotInput(String),
    /// The side info does not read as the transform writes it.
    #[error("compressed-asset side info: {0}")]
    SideInfo(#[from] edgepatch_format::Error),
    /// The content and the side info do not rebuild a stream of the stated sizes.
    #[error("compressed asset does not rebuild: {0}")]
    Rebuild(String),
}
