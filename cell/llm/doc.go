// Package llm is trawl's client for OpenAI-compatible chat-completions
// endpoints (OpenAI, Groq, DeepSeek, Mistral, OpenRouter, Together, a local
// Ollama, or any vendor whose base URL the server sets), shared by
// everything that asks a model: the crawl server's llm extraction strategy
// (cell/crawl/extract), and /extract, /answer and monitors.
//
// A Client is made per "<vendor>/<model>" by New from a server-wide
// Config: the vendor's base URL from Config.BaseURLs, <VENDOR>_BASE_URL or
// DefaultBaseURLs, its key from the caller or <VENDOR>_API_KEY. A missing
// variable is a *ConfigError that names it. Callers never choose the
// endpoint a request goes to.
//
// Calls retry a 429 or 5xx answer, or no answer, Config.Retries times,
// after the Retry-After the provider asks for (up to a minute; a longer
// wait is not made) or an exponential backoff; a final non-2xx answer is a
// *ProviderError with the status and the provider's message, the key
// redacted. CompleteJSON takes the JSON out of an answer (JSONText), and
// Chunk cuts Markdown into pieces a model's context can take.
package llm
