/**
 * Copy-paste snippets for an endpoint, for the gateway at `origin` (where the console was
 * opened: the address a client reached the gateway at). Each reads the key from the
 * GANTRY_API_KEY environment variable: no key is ever written into the page. The browser test
 * runs the curl, runpod-sdk and OpenAI snippets exactly as shown and sees them complete a job.
 */
export function snippets(origin, endpointId) {
  const base = `${origin}/v2`;
  return [
    {
      id: 'curl',
      label: 'curl',
      note: 'Sends the job and waits for its result (runsync); /run answers at once with the job id to poll at /status.',
      text: [
        `curl -s -X POST "${base}/${endpointId}/runsync" \\`,
        '  -H "Authorization: Bearer $GANTRY_API_KEY" \\',
        '  -H "Content-Type: application/json" \\',
        `  -d '{"input": {"hello": "world"}}'`,
      ].join('\n'),
    },
    {
      id: 'python',
      label: 'runpod-python',
      note: 'pip install runpod; the RunPod client works unchanged with its base URL pointed at Gantry.',
      text: [
        'import os, runpod',
        '',
        'runpod.api_key = os.environ["GANTRY_API_KEY"]',
        `runpod.endpoint_url_base = "${base}"`,
        `print(runpod.Endpoint("${endpointId}").run_sync({"input": {"hello": "world"}}, timeout=60))`,
      ].join('\n'),
    },
    {
      id: 'js',
      label: 'runpod-sdk (JavaScript)',
      note: 'npm install runpod-sdk; an ES module (save as run.mjs, run with node run.mjs).',
      text: [
        "import runpodSdk from 'runpod-sdk';",
        '',
        `const runpod = runpodSdk(process.env.GANTRY_API_KEY, { baseUrl: '${base}' });`,
        `const result = await runpod.endpoint('${endpointId}').runSync({ input: { hello: 'world' } });`,
        'console.log(JSON.stringify(result));',
      ].join('\n'),
    },
    {
      id: 'openai',
      label: 'OpenAI client',
      note: 'npm install openai; for a worker that answers OpenAI requests (docs/openai.md): every endpoint has the routes, its worker must serve them.',
      text: [
        "import OpenAI from 'openai';",
        '',
        `const client = new OpenAI({ apiKey: process.env.GANTRY_API_KEY, baseURL: '${base}/${endpointId}/openai/v1' });`,
        'const model = (await client.models.list()).data[0].id;',
        "const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }] });",
        'console.log(completion.choices[0].message.content);',
      ].join('\n'),
    },
  ];
}

/** The URLs of an endpoint's client routes, for the endpoint page. */
export function endpointUrls(origin, endpointId) {
  const v2 = `${origin}/v2/${endpointId}`;
  return [
    ['Submit a job', 'POST', `${v2}/run`],
    ['Submit and wait', 'POST', `${v2}/runsync`],
    ["A job's status", 'GET', `${v2}/status/{job id}`],
    ["A job's stream", 'GET', `${v2}/stream/{job id}`],
    ['Cancel a job', 'POST', `${v2}/cancel/{job id}`],
    ['Health', 'GET', `${v2}/health`],
    ['Purge the queue', 'POST', `${v2}/purge-queue`],
    ['OpenAI base URL', '', `${v2}/openai/v1`],
  ];
}
