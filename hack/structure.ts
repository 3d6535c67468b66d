/**
 * The shape of the source tree, as figures: rooms (folders), files, import arrows between files
 * and between rooms, the import cycles (strongly connected groups of files), the rooms that import
 * each other, and the longest functions. Run it before and after a restructuring and compare:
 *
 *   node --import tsx hack/structure.ts [--longest N]
 *
 * Type-only imports count: they are arrows a reader follows too. Tests, testing helpers and
 * generated code are left out (they are not the product's structure).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const repoRoot = join(import.meta.dirname, '..');
const ROOTS = ['api', 'kube', 'log', 'renderers', 'controller', 'agent', 'cli'];

/** Product source files: no tests, no testing helpers, no test data. */
export function sourceFiles(root = repoRoot): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== 'testing' && entry.name !== 'testdata') walk(path);
      } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) {
        out.push(relative(root, path));
      }
    }
  };
  for (const r of ROOTS) walk(join(root, r));
  return out.sort();
}

/** Relative import specifiers of one file, resolved to repo-relative .ts paths. */
export function importsOf(file: string, root = repoRoot): string[] {
  const text = readFileSync(join(root, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
  const out: string[] = [];
  const add = (spec: string): void => {
    if (!spec.startsWith('.')) return;
    const abs = resolve(dirname(join(root, file)), spec.replace(/\.js$/, '.ts'));
    out.push(relative(root, abs));
  };
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      add(node.moduleSpecifier.text);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      add(node.arguments[0].text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...new Set(out)];
}

/** Tarjan's strongly connected components with more than one member (the cycles). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const strong = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    const at = (m: Map<string, number>, k: string): number => m.get(k) ?? Infinity;
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        strong(w);
        low.set(v, Math.min(at(low, v), at(low, w)));
      } else if (onStack.has(w)) low.set(v, Math.min(at(low, v), at(idx, w)));
    }
    if (low.get(v) === idx.get(v)) {
      const group: string[] = [];
      let w: string | undefined;
      do {
        w = stack.pop();
        if (w === undefined) break;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) out.push(group.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) strong(v);
  return out;
}

/** Every named function-like node and its length in lines. */
function functionLengths(file: string): { name: string; lines: number }[] {
  const text = readFileSync(join(repoRoot, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: { name: string; lines: number }[] = [];
  const lineOf = (pos: number): number => source.getLineAndCharacterOfPosition(pos).line;
  const visit = (node: ts.Node): void => {
    let name: string | undefined;
    if (ts.isFunctionDeclaration(node) && node.body) name = node.name?.text ?? 'default';
    else if ((ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)) && node.body) {
      name = ts.isConstructorDeclaration(node) ? 'constructor' : node.name.getText(source);
    } else if (
      ts.isVariableDeclaration(node) &&
      node.initializer &&
      (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer))
    ) {
      name = node.name.getText(source);
    }
    if (name) {
      const lines = lineOf(node.getEnd()) - lineOf(node.getStart(source)) + 1;
      out.push({ name: `${file}:${lineOf(node.getStart(source)) + 1} ${name}`, lines });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

function main(): void {
  const longestArg = process.argv.indexOf('--longest');
  const longest = longestArg > 0 ? Number(process.argv[longestArg + 1]) : 15;
  const files = sourceFiles();
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const f of files)
    graph.set(
      f,
      importsOf(f).filter((t) => known.has(t)),
    );
  const arrows = [...graph.values()].reduce((n, ts) => n + ts.length, 0);

  const roomOf = (f: string): string => dirname(f);
  const rooms = new Set(files.map(roomOf));
  const roomGraph = new Map<string, Set<string>>();
  for (const [f, targets] of graph) {
    for (const t of targets) {
      if (roomOf(f) === roomOf(t)) continue;
      const set = roomGraph.get(roomOf(f)) ?? new Set<string>();
      set.add(roomOf(t));
      roomGraph.set(roomOf(f), set);
    }
  }
  const roomArrows = [...roomGraph.values()].reduce((n, s) => n + s.size, 0);
  const roomCycles = cycles(new Map([...roomGraph].map(([k, v]) => [k, [...v]])));
  const fileCycles = cycles(graph);

  const fns = files.flatMap(functionLengths).sort((a, b) => b.lines - a.lines);
  console.log(`files ${files.length}, rooms ${rooms.size}`);
  console.log(`import arrows: ${arrows} between files, ${roomArrows} between rooms`);
  console.log(`file cycles: ${fileCycles.length}`);
  for (const c of fileCycles) console.log(`  ${c.join(' <-> ')}`);
  console.log(`room cycles: ${roomCycles.length}`);
  for (const c of roomCycles) console.log(`  ${c.join(' <-> ')}`);
  console.log(
    `functions over 80 lines: ${fns.filter((f) => f.lines > 80).length}, over 100: ${fns.filter((f) => f.lines > 100).length}`,
  );
  for (const f of fns.slice(0, longest)) console.log(`  ${String(f.lines).padStart(4)} ${f.name}`);
}

if (import.meta.filename === process.argv[1]) main();
