// Prints what oscar's bootstrap additions cost a machine's user data, per format (budget: the
// provision example with the additions ≤ 16 KiB, the additions alone ≤ 4.5 KiB).
//   node --import tsx hack/bench/bootstrap-size.ts
import { userDataSizes } from '../../controller/bootstrap/sizes.js';
import { defaultRegistry } from '../../renderers/registry.js';

const rows = await userDataSizes(defaultRegistry());
console.log('format        type      example  example+additions  additions alone');
for (const r of rows) {
  console.log(
    `${r.format.padEnd(13)} ${r.type.padEnd(9)} ${String(r.example).padStart(7)}  ${String(r.withAdditions).padStart(17)}  ${String(r.additions).padStart(15)}`,
  );
}
console.log('(bytes; budget 16384 for example+additions, 4608 for the additions alone)');
