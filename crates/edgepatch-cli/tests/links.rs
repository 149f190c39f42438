//! Links are data: a build whose links leave it (Debian's lincity-ng-data
//! links `fonts/sans.ttf -> ../../fonts/truetype/dejavu/DejaVuSans.ttf`),
//! chains (`x -> .`, `s -> x/..`) and links to directories inside diff and
//! apply byte-exact with their links, and nothing outside OLD and OUT is
//! ever read or written through one.

// Symlinks in builds: tested on Unix (on Windows they need a privilege).
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

mod common;
use common::{edgepatch, leftovers, ok, snapshot};

/// A game data tree in lincity-ng-data's shape, `version` 1 or 2.
fn lincity_like(root: &Path, version: u32) {
    for d in ["data/images", "fonts", "levels"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    for i in 0..40u32 {
        let body = format!("image {i} of version {}\n", if i % 5 == 0 { version } else { 1 }).repeat(50 + i as usize);
        fs::write(root.join(format!("data/images/tile{i:02}.png")), body).unwrap();
    }
    fs::write(root.join("levels/good_times.scn"), format!("level v{version}\n").repeat(300)).unwrap();
    // Into the system's fonts (relative, above the build root) and absolute.
    let sans = if version == 1 { "DejaVuSans.ttf" } else { "DejaVuSans-Bold.ttf" };
    symlink(format!("../../fonts/truetype/dejavu/{sans}"), root.join("fonts/sans.ttf")).unwrap();
    symlink("/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf", root.join("fonts/serif.ttf")).unwrap();
    // A link to a directory inside the build, and one to a file through it.
    symlink("data/images", root.join("images")).unwrap();
    symlink("../images/tile03.png", root.join("levels/preview.png")).unwrap();
    // A chain: each step lexically inside, together the build's parent.
    symlink(".", root.join("x")).unwrap();
    symlink("x/..", root.join("s")).unwrap();
    symlink("s/sentinel/secret", root.join("through_s")).unwrap();
    if version == 1 {
        symlink("levels/good_times.scn", root.join("readme")).unwrap();
        fs::write(root.join("levels/old.txt"), b"a file that becomes a link").unwrap();
    } else {
        fs::write(root.join("readme"), b"a link that became a file").unwrap();
        symlink("good_times.scn", root.join("levels/old.txt")).unwrap();
        symlink("../../music/lincity", root.join("music")).unwrap();
    }
}

/// A directory beside OUT that `s`, `through_s` and friends point at once
/// applied: it must stay exactly as it is.
fn sentinel(parent: &Path) -> std::path::PathBuf {
    let dir = parent.join("sentinel");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("secret"), b"untouched").unwrap();
    dir
}

#[test]
fn lincity_style_links_diff_and_apply_byte_exact_with_a_warning_for_each_link_leaving() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    lincity_like(&v1, 1);
    lincity_like(&v2, 2);
    let guard = sentinel(tmp.path());
    let (guard_before, v1_before) = (snapshot(&guard), snapshot(&v1));

    let patch = tmp.path().join("p.patch");
    let res = edgepatch(&[&"diff", &v1, &v2, &patch]);
    // Without the progress lines (stderr is not a terminal here).
    let warnings: String = String::from_utf8_lossy(&res.stderr).lines().filter(|l| !l.starts_with("edgepatch: diff: ")).map(|l| format!("{l}\n")).collect();
    ok(res);
    let mut warned: Vec<&str> = warnings.lines().map(|l| l.split_whitespace().nth(4).unwrap_or(l)).collect();
    warned.sort();
    assert_eq!(warned, ["fonts/sans.ttf", "fonts/serif.ttf", "music", "s", "through_s"], "{warnings}");
    assert!(warnings.lines().all(|l| l.starts_with("edgepatch: warning: new: link ") && l.contains("points outside the build")), "{warnings}");

    let out = tmp.path().join("out");
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2), "applied tree differs from v2 (links compared by target)");
    assert_eq!(fs::read_link(out.join("fonts/sans.ttf")).unwrap(), Path::new("../../fonts/truetype/dejavu/DejaVuSans-Bold.ttf"));
    assert_eq!(fs::read_link(out.join("s")).unwrap(), Path::new("x/.."));
    // The links work as links: through the directory link, and the chain
    // reaching OUT's parent.
    assert_eq!(fs::read(out.join("levels/preview.png")).unwrap(), fs::read(v2.join("data/images/tile03.png")).unwrap());
    assert_eq!(fs::read(out.join("through_s")).unwrap(), b"untouched");

    let sig = tmp.path().join("v2.sig");
    ok(edgepatch(&[&"sign", &v2, &sig]));
    assert!(ok(edgepatch(&[&"verify", &out, &sig])).contains("match"));
    assert_eq!(snapshot(&guard), guard_before, "the sentinel beside OUT changed");
    assert_eq!(snapshot(&v1), v1_before, "OLD was modified");
    assert!(leftovers(tmp.path()).is_empty(), "{:?}", leftovers(tmp.path()));

    // v1 -> v1: every link kept as it is (the patch names none of them).
    let same = tmp.path().join("same.patch");
    ok(edgepatch(&[&"diff", &v1, &v1, &same]));
    let out1 = tmp.path().join("out1");
    ok(edgepatch(&[&"apply", &v1, &same, &out1]));
    assert_eq!(snapshot(&out1), snapshot(&v1));
}

/// OLD as the patch expects it, except that a directory the patch copies
/// from is now a link to a look-alike outside OLD: the listing no longer
/// matches, so the apply is refused before anything is read through it or
/// written, and the look-alike is never touched.
#[test]
fn an_old_build_with_a_link_in_place_of_a_directory_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let (v1, v2) = (tmp.path().join("v1"), tmp.path().join("v2"));
    lincity_like(&v1, 1);
    lincity_like(&v2, 2);
    let patch = tmp.path().join("p.patch");
    ok(edgepatch(&[&"diff", &v1, &v2, &patch]));

    let look_alike = tmp.path().join("look-alike");
    fs::rename(v1.join("data"), &look_alike).unwrap();
    symlink("../look-alike", v1.join("data")).unwrap();
    let before = snapshot(&look_alike);
    let out = tmp.path().join("out");
    let res = edgepatch(&[&"apply", &v1, &patch, &out]);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(!res.status.success() && err.starts_with("edgepatch: error: ") && err.lines().count() == 1, "{err}");
    assert!(!out.exists() && leftovers(tmp.path()).is_empty());
    assert_eq!(snapshot(&look_alike), before);

    // A link chain in OLD that the patch keeps as it is (not a directory it
    // reads from): the apply works and creates the links, reading nothing through them.
    fs::remove_file(v1.join("data")).unwrap();
    fs::rename(&look_alike, v1.join("data")).unwrap();
    ok(edgepatch(&[&"apply", &v1, &patch, &out]));
    assert_eq!(snapshot(&out), snapshot(&v2));
}
