import { Template } from '@huggingface/jinja';
import { HandlerInvalidError, InferenceInputError } from '../core/errors.js';

export interface ChatMessage {
  readonly role: string;
  readonly content: string;
}

/** How a chat becomes a prompt; `special` says whether the prompt still needs its special tokens. */
export interface ChatTemplate {
  render(messages: readonly ChatMessage[]): string;
  /** False for a model's own template, which writes its special tokens itself (as transformers does). */
  readonly addSpecialTokens: boolean;
}

/** Without a template of the model's own: `role: content` lines, ending `assistant:`. */
export const PLAIN_CHAT: ChatTemplate = {
  render: (messages) => `${messages.map((message) => `${message.role}: ${message.content}`).join('\n')}\nassistant:`,
  addSpecialTokens: true,
};

interface TokenizerConfig {
  chat_template?: unknown;
  bos_token?: unknown;
  eos_token?: unknown;
}

/** An added token of tokenizer_config.json: a string, or `{content}`. */
function tokenText(token: unknown): string {
  if (typeof token === 'string') return token;
  const content = (token as { content?: unknown } | null)?.content;
  return typeof content === 'string' ? content : '';
}

/**
 * A model's Jinja chat template (run by @huggingface/jinja, the engine of transformers.js):
 * the file text.chat_template_file names, a tokenizer_config.json (its `chat_template`, the
 * default one of a list, with its bos and eos tokens) or the template itself.
 */
export function loadChatTemplate(text: string, file: string): ChatTemplate {
  let source = text;
  let variables: Record<string, string> = { bos_token: '', eos_token: '' };
  if (file.endsWith('.json')) {
    let config: TokenizerConfig;
    try {
      config = JSON.parse(text) as TokenizerConfig;
    } catch (error) {
      throw new HandlerInvalidError(`text.chat_template_file ${file} is not JSON: ${(error as Error).message}`);
    }
    const template = Array.isArray(config.chat_template)
      ? (config.chat_template as { name?: unknown; template?: unknown }[]).find((entry) => entry.name === 'default')
          ?.template
      : config.chat_template;
    if (typeof template !== 'string') {
      throw new HandlerInvalidError(`text.chat_template_file ${file} has no chat_template`);
    }
    source = template;
    variables = { bos_token: tokenText(config.bos_token), eos_token: tokenText(config.eos_token) };
  }
  let template: Template;
  try {
    template = new Template(source);
  } catch (error) {
    throw new HandlerInvalidError(
      `text.chat_template_file ${file} is not a template this server can run: ${String(error)}`,
    );
  }
  return {
    addSpecialTokens: false,
    render(messages) {
      try {
        return template.render({ messages, add_generation_prompt: true, ...variables });
      } catch (error) {
        // A template's raise_exception() says what it refuses (roles out of order, say).
        throw new InferenceInputError(`the model's chat template refused the messages: ${(error as Error).message}`);
      }
    },
  };
}
