// An external oscar renderer for Alpine Linux (OpenRC, apk), in plain Node.js with no
// dependencies. It speaks oscar.dev/render/v1 (see docs/renderer-protocol.md):
//   POST /render  RenderRequest → RenderResponse, or a RenderError that oscar shows in the OSC status.
// Alpine has no systemd, so an OSC with units is refused, naming the unit.
// Run: PORT=9000 node server.mjs   (prints {"msg":"listening","url":…} once it listens)
import { createServer } from 'node:http';
import { posix } from 'node:path';

const API_VERSION = 'oscar.dev/render/v1';
const q = (s) => `'${s.replaceAll("'", `'\\''`)}'`; // one shell word, whatever the bytes

function render({ config, context }) {
  if (context.format !== 'script') {
    return {
      status: 422,
      error: {
        code: 'UnsupportedFormat',
        field: 'spec.format',
        message: `alpine renders "script" only, not "${context.format}"`,
      },
    };
  }
  if (config.units.length > 0) {
    const name = config.units[0].name;
    return {
      status: 422,
      error: {
        code: 'Unsupported',
        field: 'spec.units[0]',
        message: `Alpine runs OpenRC, not systemd: cannot install ${name}; remove the unit or use type "generic"`,
      },
    };
  }
  if (config.cri) {
    return {
      status: 422,
      error: {
        code: 'Unsupported',
        field: 'spec.cri',
        message: 'this example does not set up a container runtime on Alpine; remove spec.cri',
      },
    };
  }
  const lines = [
    '#!/bin/sh',
    `# Rendered for Alpine from OperatingSystemConfig ${context.namespace}/${context.name} (${context.purpose}).`,
    'set -eu',
  ];
  if (config.packages.length > 0) {
    lines.push(
      `apk add --no-cache ${config.packages.map((p) => q(p.version ? `${p.name}=${p.version}` : p.name)).join(' ')}`,
    );
  }
  for (const f of config.files) {
    const tmp = `${f.path}.oscar-tmp`;
    lines.push(
      `mkdir -p ${q(posix.dirname(f.path))}`,
      `printf '%s' ${q(f.content)} | base64 -d > ${q(tmp)}`,
      `chown ${q(`${f.user}:${f.group}`)} ${q(tmp)}`,
      `chmod ${f.mode.toString(8).padStart(4, '0')} ${q(tmp)}`,
      `mv -f ${q(tmp)} ${q(f.path)}`,
    );
  }
  const userData = Buffer.from(`${lines.join('\n')}\n`).toString('base64');
  return {
    status: 200,
    body: {
      apiVersion: API_VERSION,
      kind: 'RenderResponse',
      userData,
      format: 'script',
      extraUnits: [],
      extraFiles: [],
      warnings: [],
    },
  };
}

const send = (res, status, body) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

const server = createServer((req, res) => {
  if (req.method !== 'POST' || req.url !== '/render')
    return send(res, 404, {
      apiVersion: API_VERSION,
      kind: 'RenderError',
      error: { code: 'NotFound', message: 'POST /render' },
    });
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let request;
    try {
      request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return send(res, 400, {
        apiVersion: API_VERSION,
        kind: 'RenderError',
        error: { code: 'BadRequest', message: 'the body is not JSON' },
      });
    }
    if (request?.apiVersion !== API_VERSION || !request.config || !request.context) {
      return send(res, 400, {
        apiVersion: API_VERSION,
        kind: 'RenderError',
        error: { code: 'BadRequest', message: `expected a ${API_VERSION} RenderRequest` },
      });
    }
    const out = render(request);
    send(
      res,
      out.status,
      out.body ?? { apiVersion: API_VERSION, kind: 'RenderError', error: out.error },
    );
  });
});

server.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1', () => {
  const { address, port } = server.address();
  console.log(JSON.stringify({ msg: 'listening', url: `http://${address}:${port}/render` }));
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
