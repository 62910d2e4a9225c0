// The scripted OpenAI-compatible model lives in src/demo (users run it with `sessiond demo --serve-model`).
export * from '../../src/demo/model-server.ts';
export * from '../../src/demo/model-scripts.ts';
