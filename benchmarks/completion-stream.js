// A streamed /v1/completions request read as it arrives, for the generation benchmarks: the
// time of every chunk of text, rather than the summary bench's own client (openai-load.ts) keeps.
import { request } from 'undici';

/**
 * One streamed completion (temperature 0, usage asked): when each chunk of text arrived, the
 * text, the usage. `onText(at)` hears each chunk as it comes; `signal` ends the request early;
 * `fields` go in the body beside the rest (response_format).
 */
export async function streamCompletion(url, model, prompt, maxTokens, dispatcher, { signal, onText, fields } = {}) {
  const body = {
    ...fields,
    model,
    prompt,
    max_tokens: maxTokens,
    temperature: 0,
    stream: true,
    stream_options: { include_usage: true },
  };
  const sentAt = performance.now();
  const response = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher,
    signal,
  });
  if (response.statusCode !== 200) throw new Error(`HTTP ${response.statusCode}: ${await response.body.text()}`);
  const arrivals = [];
  let text = '';
  let usage;
  let pending = '';
  for await (const chunk of response.body) {
    const now = performance.now();
    pending += chunk.toString('utf8');
    let end;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const event = pending.slice(0, end);
      pending = pending.slice(end + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6));
      if (data.error) throw new Error(`stream error: ${data.error.message}`);
      if (data.usage) usage = data.usage;
      const piece = data.choices?.[0]?.text;
      if (piece) {
        arrivals.push(now);
        text += piece;
        onText?.(now);
      }
    }
  }
  return { sentAt, arrivals, text, usage };
}
