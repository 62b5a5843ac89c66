// What the page keeps in the browser (localStorage): the conversations, the settings and the API
// key. Writes that fail (storage full or disabled) are reported, not thrown: the page keeps
// working for this visit.
const KEYS = { convs: 'll3.conversations', current: 'll3.current', settings: 'll3.settings', key: 'll3.apiKey' };

// Every sampling field is a string from its input; an empty one is left to the server's default.
export const DEFAULT_SETTINGS = {
  system: '',
  temperature: '',
  top_p: '',
  top_k: '',
  min_p: '',
  max_tokens: '', // to the end of the answer or of the context (the API's own default)
  seed: '',
};

function read(key, fallback) {
  try {
    const v = localStorage.getItem(key);
    return v === null ? fallback : JSON.parse(v);
  } catch {
    return fallback;
  }
}

function write(key, value) {
  try {
    localStorage.setItem(key, JSON.stringify(value));
    return true;
  } catch (e) {
    console.warn(`ll3: could not save ${key}: ${e.message}`);
    return false;
  }
}

export const store = {
  conversations: () => {
    const v = read(KEYS.convs, []);
    return Array.isArray(v) ? v.filter((c) => c && typeof c.id === 'string' && Array.isArray(c.messages)) : [];
  },
  saveConversations: (convs) => write(KEYS.convs, convs),
  current: () => read(KEYS.current, null),
  saveCurrent: (id) => write(KEYS.current, id),
  settings: () => ({ ...DEFAULT_SETTINGS, ...read(KEYS.settings, {}) }),
  saveSettings: (s) => write(KEYS.settings, s),
  apiKey: () => read(KEYS.key, ''),
  saveApiKey: (k) => write(KEYS.key, k),
};
