-- Request classes from an OpenAI-style JSON body, inside Envoy.
--
-- xds-control prepends `local CLASSIFY = {...}` (limits, header names, keyword groups) to this
-- file and delivers it over LDS as an envoy.filters.http.lua filter ahead of the router. The
-- filter reads a bounded body, sets headers that routes match (model, estimated prompt tokens,
-- max_tokens, stream, a prefix hash for MAGLEV, keyword groups) and the request's token cost
-- (prompt + max_tokens, one header, since Envoy's rate limit hits_addend reads one), and clears
-- the route cache so the router picks the route again. A body it cannot read (too large, no content-length, not
-- JSON, not a completion request) gets no headers: the request takes the default route. It
-- never answers a request itself, so a classifier bug cannot turn into an error for a client.
--
-- Envoy's Lua has no JSON library: `decode` is a small recursive-descent parser, bounded by the
-- body limit and a nesting limit. Envoy runs LuaJIT (Lua 5.1), so nothing here needs `bit` or
-- 5.2+ features; the unit tests run this same file under Lua 5.1.

local NULL = {}

-- The largest cost in tokens a request is given: a whole number a rate limiter's uint64 and a
-- double both hold exactly, far above any bucket (1e6/s x 60 s).
local COST_MAX = 1000000000

local ESCAPES = {
  ['"'] = '"', ['\\'] = '\\', ['/'] = '/',
  b = '\b', f = '\f', n = '\n', r = '\r', t = '\t',
}

local function utf8_char(code)
  if code < 0x80 then
    return string.char(code)
  elseif code < 0x800 then
    return string.char(0xC0 + math.floor(code / 0x40), 0x80 + code % 0x40)
  elseif code < 0x10000 then
    return string.char(
      0xE0 + math.floor(code / 0x1000),
      0x80 + math.floor(code / 0x40) % 0x40,
      0x80 + code % 0x40
    )
  end
  return string.char(
    0xF0 + math.floor(code / 0x40000),
    0x80 + math.floor(code / 0x1000) % 0x40,
    0x80 + math.floor(code / 0x40) % 0x40,
    0x80 + code % 0x40
  )
end

local function unicode_escape(s, k)
  -- The code point of the \u escape at k (a surrogate pair counts as one) and the index after.
  local hex = string.sub(s, k + 2, k + 5)
  if string.find(hex, '^%x%x%x%x$') == nil then error('bad \\u escape') end
  local code = tonumber(hex, 16)
  if code >= 0xD800 and code < 0xDC00 and string.sub(s, k + 6, k + 7) == '\\u' then
    local low_hex = string.sub(s, k + 8, k + 11)
    local low = string.find(low_hex, '^%x%x%x%x$') and tonumber(low_hex, 16)
    if low and low >= 0xDC00 and low < 0xE000 then
      return 0x10000 + (code - 0xD800) * 0x400 + (low - 0xDC00), k + 12
    end
  end
  return code, k + 6
end

local function skip(s, i)
  return string.find(s, '[^ \t\r\n]', i) or (#s + 1)
end

local function decode_string(s, i)
  -- s:sub(i, i) is the opening quote; returns the text and the index after the closing quote.
  local parts, n, j = {}, 0, i + 1
  while true do
    local k = string.find(s, '["\\]', j)
    if k == nil then error('unterminated string') end
    n = n + 1
    parts[n] = string.sub(s, j, k - 1)
    if string.sub(s, k, k) == '"' then return table.concat(parts), k + 1 end
    local c = string.sub(s, k + 1, k + 1)
    if c == 'u' then
      local code
      code, j = unicode_escape(s, k)
      n = n + 1
      parts[n] = utf8_char(code)
    else
      local plain = ESCAPES[c]
      if plain == nil then error('bad escape') end
      n = n + 1
      parts[n] = plain
      j = k + 2
    end
  end
end

local decode_value

local function decode_object(s, i, depth)
  local out = {}
  i = skip(s, i + 1)
  if string.sub(s, i, i) == '}' then return out, i + 1 end
  while true do
    if string.sub(s, i, i) ~= '"' then error('expected a key') end
    local key
    key, i = decode_string(s, i)
    i = skip(s, i)
    if string.sub(s, i, i) ~= ':' then error('expected :') end
    out[key], i = decode_value(s, skip(s, i + 1), depth)
    i = skip(s, i)
    local c = string.sub(s, i, i)
    if c == '}' then return out, i + 1 end
    if c ~= ',' then error('expected , or }') end
    i = skip(s, i + 1)
  end
end

local function decode_array(s, i, depth)
  local out, n = {}, 0
  i = skip(s, i + 1)
  if string.sub(s, i, i) == ']' then return out, i + 1 end
  while true do
    n = n + 1
    out[n], i = decode_value(s, i, depth)
    i = skip(s, i)
    local c = string.sub(s, i, i)
    if c == ']' then return out, i + 1 end
    if c ~= ',' then error('expected , or ]') end
    i = skip(s, i + 1)
  end
end

local LITERALS = { ['true'] = true, ['false'] = false, ['null'] = NULL }

decode_value = function(s, i, depth)
  if depth <= 0 then error('nested too deep') end
  local c = string.sub(s, i, i)
  if c == '{' then return decode_object(s, i, depth - 1) end
  if c == '[' then return decode_array(s, i, depth - 1) end
  if c == '"' then return decode_string(s, i) end
  local word = string.match(s, '^%a+', i)
  if word ~= nil then
    local value = LITERALS[word]
    if value == nil then error('bad literal') end
    return value, i + #word
  end
  local number = string.match(s, '^-?%d+%.?%d*[eE]?[-+]?%d*', i)
  if number == nil or tonumber(number) == nil then error('bad value') end
  return tonumber(number), i + #number
end

function decode(s, max_depth)
  local value, i = decode_value(s, skip(s, 1), max_depth)
  if skip(s, i) <= #s then error('trailing data') end
  return value
end

function prefix_hash(text)
  -- Two polynomial hashes modulo primes below 2^31: every product stays exact in a double, so
  -- the value is the same on any Lua. MAGLEV hashes the header again; this only has to be
  -- stable and spread different prefixes.
  local a, b = 7, 11
  for k = 1, #text do
    local byte = string.byte(text, k)
    a = (a * 31 + byte) % 2147483647
    b = (b * 131 + byte) % 2147483629
  end
  return string.format('%08x%08x', a, b)
end

local function content_text(content, into)
  if type(content) == 'string' then
    into[#into + 1] = content
  elseif type(content) == 'table' then
    for _, part in ipairs(content) do
      if type(part) == 'table' and type(part.text) == 'string' then into[#into + 1] = part.text end
    end
  end
end

local function prompt_texts(doc)
  -- The prompt's texts, and the system (or developer) message's; nil when the body is not a
  -- completion or chat request.
  local texts, system = {}, {}
  if type(doc.prompt) == 'string' then
    texts[1] = doc.prompt
  elseif type(doc.prompt) == 'table' then
    for _, p in ipairs(doc.prompt) do
      if type(p) == 'string' then texts[#texts + 1] = p end
    end
  elseif type(doc.messages) == 'table' then
    for _, message in ipairs(doc.messages) do
      if type(message) == 'table' then
        content_text(message.content, texts)
        if message.role == 'system' or message.role == 'developer' then
          content_text(message.content, system)
        end
      end
    end
  else
    return nil
  end
  return texts, table.concat(system)
end

local function keyword_groups(text, groups)
  local lower, hits = string.lower(text), {}
  for _, group in ipairs(groups) do
    for _, word in ipairs(group.words) do
      if string.find(lower, word, 1, true) ~= nil then
        hits[#hits + 1] = group.name
        break
      end
    end
  end
  return ',' .. table.concat(hits, ',') .. ','
end

function classify(body, cfg)
  -- Header key -> value for a body, or nil when it is not an OpenAI completion/chat request.
  local ok, doc = pcall(decode, body, cfg.max_depth)
  if not ok or type(doc) ~= 'table' then return nil end
  local texts, system = prompt_texts(doc)
  if texts == nil then return nil end
  local prompt = table.concat(texts)
  local out = {
    prompt_tokens = tostring(math.ceil(#prompt / 4)),
    stream = doc.stream == true and 'true' or 'false',
    keywords = keyword_groups(prompt, cfg.keywords),
  }
  if #system > 0 then
    out.prefix_hash = prefix_hash(system)
  else
    out.prefix_hash = prefix_hash(string.sub(prompt, 1, cfg.prefix_bytes))
  end
  local model = doc.model
  if type(model) == 'string' and #model <= 256 and string.find(model, '^[%w%._:/@+-]+$') then
    out.model = model
  end
  local max_tokens = doc.max_tokens
  if type(max_tokens) ~= 'number' then max_tokens = doc.max_completion_tokens end
  local cost = math.ceil(#prompt / 4)
  if type(max_tokens) == 'number' and max_tokens >= 0 then
    out.max_tokens = string.format('%d', math.floor(math.min(max_tokens, COST_MAX)))
    cost = cost + math.floor(math.min(max_tokens, COST_MAX))
  end
  out.cost_tokens = string.format('%d', math.max(1, math.min(cost, COST_MAX)))
  return out
end

function valid_cost(value)
  -- A client's own cost header counts when it is a whole number from 1 to COST_MAX.
  if value == nil or string.find(value, '^%d+$') == nil or #value > 10 then return false end
  local n = tonumber(value)
  return n >= 1 and n <= COST_MAX
end

function envoy_on_request(handle)
  local cfg = CLASSIFY
  local headers = handle:headers()
  local names = cfg.headers
  -- A client that names its model and prefix has classified itself: no body read at all.
  if headers:get(names.model) ~= nil and headers:get(names.prefix_hash) ~= nil then return end
  local length = tonumber(headers:get('content-length') or '')
  if length == nil or length <= 0 or length > cfg.max_body_bytes then return end
  local body = handle:body()
  if body == nil then return end
  local out = classify(body:getBytes(0, body:length()), cfg)
  if out == nil then return end
  -- body() yielded until the body was in: the header map from before is out of scope now.
  headers = handle:headers()
  for key, name in pairs(names) do
    -- A header the client sent wins over what the body says; a cost that is not a whole
    -- number in bounds is replaced, since the rate limiter would count it as one token.
    local sent = headers:get(name)
    if out[key] ~= nil and sent == nil then
      headers:add(name, out[key])
    elseif out[key] ~= nil and key == 'cost_tokens' and not valid_cost(sent) then
      headers:replace(name, out[key])
    end
  end
  handle:clearRouteCache()
end
