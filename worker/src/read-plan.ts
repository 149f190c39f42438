// The read plan of a generation step: which R2 ranges hold the bytes the generator asks for.
// A file's ranges are read from the build's stored tar; a transformed module's normalized form
// and a split old module from the objects the transform phase wrote (transform.ts).
import { GenerationError, groupReads, type BuildRange, type BuildReads, type StoredBuild } from "./reads";
import { splitOldAt, type ModuleTransform } from "./transform";

/**
 * Plans the reads of the concatenation of `ranges` of a stored build: spans sorted, merged
 * across small gaps (tar headers, neighbouring files) into reads of at most MAX_READ bytes.
 * A range of a module's normalized form (`normalized`), or of a split old module (`oldSplit`),
 * is read from the run object the transform phase wrote (`transforms`, by the new module's path,
 * or by the old file's for a split old module).
 */
export function planBuildReads(build: StoredBuild, ranges: BuildRange[], transforms: ReadonlyMap<string, ModuleTransform> = new Map()): BuildReads {
  let total = 0;
  const spans = ranges.map((r) => {
    let key = build.tarKey;
    let base: number;
    let size: number;
    if (r.normalized) {
      // Never answer a range of a normalized form with the file's bytes.
      const t = transforms.get(r.path);
      if (t === undefined) throw new GenerationError(500, `generator asked for the normalized form of ${r.path}, which this generation did not make`);
      [key, base, size] = [t.normalizedKey, 0, t.normalizedSize];
    } else if (r.oldSplit) {
      // Nor one of a split old module (docs/FORMAT.md §2.8.7).
      const split = splitOldAt(transforms, r.path);
      if (split === undefined) throw new GenerationError(500, `generator asked for the split old module of ${r.path}, which this generation did not make`);
      [key, base, size] = [split.key, 0, split.size];
    } else {
      const entry = build.index.get(r.path);
      if (entry === undefined) throw new GenerationError(500, `generator asked for ${r.path}, which is not a file of ${build.record.build}`);
      [base, size] = [entry.offset, entry.size];
    }
    const form = r.normalized ? "the normalized form of " : r.oldSplit ? "the split old module of " : "";
    if (r.offset < 0 || r.length < 0 || r.offset + r.length > size) throw new GenerationError(500, `generator asked for bytes ${r.offset}+${r.length} of ${form}${r.path} (${size} bytes)`);
    const span = { key, src: base + r.offset, len: r.length, dst: total };
    total += r.length;
    return span;
  });
  const sorted = spans.filter((s) => s.len > 0).sort((a, b) => (a.key === b.key ? a.src - b.src : a.key < b.key ? -1 : 1));
  const groups = groupReads(sorted, (s) => [s.key, s.src, s.src + s.len]).map(({ key, start, end, members }) => ({ key, start, end, spans: members }));
  return { total, groups };
}
