// Counts the catches of src/ and machines/ that let an error go unsaid: a `catch` clause or a
// `.catch(handler)` (or `.then(ok, handler)`) whose handler neither throws, nor logs, nor uses the error it caught.
// Each such catch must carry a comment (inside it, or on the line above it) saying why it may be silent.
// Usage: node scripts/silent-catches.mjs [--list] [--check]   (--check: exit 1 if one has no comment)
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

const ROOTS = ['src', 'machines'];
const LOGS = /(^|\.)#?(log|warn|error|info|debug|logger|console|reportError|emit)$/;

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return /\.tsx?$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** True if `node` throws, calls a log-like function, or reads the identifier `errorName`. */
function speaks(node, errorName) {
  let found = false;
  const visit = (n) => {
    if (found) return;
    if (ts.isThrowStatement(n)) found = true;
    else if (ts.isCallExpression(n) && LOGS.test(n.expression.getText())) found = true;
    else if (
      errorName !== null &&
      ts.isIdentifier(n) &&
      n.text === errorName &&
      !(ts.isParameter(n.parent) || ts.isVariableDeclaration(n.parent))
    )
      found = true;
    else ts.forEachChild(n, visit);
  };
  visit(node);
  return found;
}

function commented(source, node, anchor) {
  const text = source.getFullText();
  if (/\/\/|\/\*/.test(node.getText())) return true;
  // The line above the catch, or above the statement that holds the `.catch(…)`.
  const line = source.getLineAndCharacterOfPosition(anchor.getStart()).line;
  const lines = text.split('\n');
  const catchLine = source.getLineAndCharacterOfPosition(node.getStart()).line;
  return [line - 1, catchLine - 1, catchLine].some(
    (n) => n >= 0 && /^\s*(\/\/|\*|\/\*)/.test(lines[n] ?? '') && (n !== catchLine || /\/\//.test(lines[n])),
  );
}

const sites = [];
for (const root of ROOTS) {
  for (const path of files(root)) {
    const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (ts.isCatchClause(node)) {
        const name =
          node.variableDeclaration && ts.isIdentifier(node.variableDeclaration.name)
            ? node.variableDeclaration.name.text
            : null;
        if (!speaks(node.block, name)) sites.push({ path, node, anchor: node, source });
      } else if (
        ts.isCallExpression(node) &&
        ts.isPropertyAccessExpression(node.expression) &&
        ((node.expression.name.text === 'catch' && node.arguments.length === 1) ||
          (node.expression.name.text === 'then' && node.arguments.length === 2))
      ) {
        const handler = node.arguments.at(-1);
        const param =
          ts.isArrowFunction(handler) || ts.isFunctionExpression(handler) ? handler.parameters[0] : undefined;
        const name = param !== undefined && ts.isIdentifier(param.name) ? param.name.text : null;
        const body = ts.isArrowFunction(handler) || ts.isFunctionExpression(handler) ? handler.body : handler;
        // A handler passed by name (`.catch(reject)`) hands the error on.
        if (ts.isIdentifier(handler) || ts.isPropertyAccessExpression(handler)) return ts.forEachChild(node, visit);
        if (!speaks(body, name)) {
          let anchor = node;
          while (anchor.parent !== undefined && !ts.isStatement(anchor) && !ts.isClassElement(anchor))
            anchor = anchor.parent;
          sites.push({ path, node: handler, anchor, source });
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}

const unexplained = sites.filter((s) => !commented(s.source, s.node, s.anchor));
const where = (s) => `${s.path}:${s.source.getLineAndCharacterOfPosition(s.node.getStart()).line + 1}`;
if (process.argv.includes('--list')) for (const s of unexplained) console.log(where(s));
console.log(`silent catches: ${sites.length}; without a comment saying why: ${unexplained.length}`);
if (process.argv.includes('--check') && unexplained.length > 0) process.exitCode = 1;
