-- The prelude's first file: every call's KEYS and ARGV against
-- scripts.list, before the script runs (embed-lua.py puts bad_call() at
-- the top of each function, and run_batch() calls bad_args() on each
-- call of a batch before any runs). A call from anyone who may FCALL (an
-- ACL user, an agent of another version, a bug) with an argument not of
-- its declared type, or keys not of the script's shape, writes nothing
-- and gets "ERR fleetsem: ..." naming the argument or key and why.
-- ARG_TYPES, KEY_SHAPES and the limits in them come from scripts.list,
-- keys.list and the agent's headers (the lines above this file).

-- Memos of what the checks found before, for the values a host sends
-- again and again (its name, a description, a name's keys): a check
-- costs a call of a string function a character class, a memo's lookup
-- none. Each memo is emptied when it holds MEMO_MAX entries, so no caller
-- can grow one; an entry only ever says what a check would say again.
local MEMO_MAX = 256
local VALUE_MEMO, NAME_MEMO, FLEET_MEMO = {}, {}, {}
local MEMO_SIZE = {[VALUE_MEMO] = 0, [NAME_MEMO] = 0, [FLEET_MEMO] = 0}

local function memo_put(memo, key, value)
  if MEMO_SIZE[memo] >= MEMO_MAX then
    for k in pairs(memo) do memo[k] = nil end
    MEMO_SIZE[memo] = 0
  end
  memo[key], MEMO_SIZE[memo] = value, MEMO_SIZE[memo] + 1
end

-- What characters v has: 'd' digits alone (after a '-'), 'ok' no space
-- or control character, 's' a space and no control character, 'c' a
-- control character.
local function value_chars(v)
  local chars = VALUE_MEMO[v]
  if not chars then
    chars = string.find(v, '^%-?%d+$') and 'd' or string.find(v, '%c') and 'c' or string.find(v, '%s') and 's' or
      'ok'
    memo_put(VALUE_MEMO, v, chars)
  end
  return chars
end

-- Why v is no value of the argument type a (nil: it is one). a is
-- {NAME, TYPE, ...} as ARG_TYPES has it.
local function arg_fault(a, v)
  local t = a[2]
  if t == 'int' then              -- {NAME, 'int', LO, HI, EMPTY}
    if v == '' and a[5] then return nil end
    if #v > 17 or value_chars(v) ~= 'd' then return 'not an integer' end
    local n = v + 0     -- (digits alone: a coercion, cheaper than tonumber())
    if n >= 2 ^ 53 or n <= -2 ^ 53 then return 'not below 2^53' end   -- (a double holds those exactly)
    if a[3] and n < a[3] then return 'below ' .. string.format('%.0f', a[3]) end
    if a[4] and n > a[4] then return 'above ' .. string.format('%.0f', a[4]) end
  elseif t == 'lease' then        -- {NAME, 'lease', EMPTY}
    if v == '' and a[3] then return nil end
    if #v ~= 32 or string.find(v, '[^0-9a-f]') then return 'not a lease id (32 lower-case hex digits)' end
  elseif t == 'word' then         -- {NAME, 'word', MAX, EMPTY}
    if v == '' then return not a[4] and 'empty' or nil end
    if #v > a[3] then return 'longer than ' .. a[3] .. ' bytes' end
    local chars = value_chars(v)
    if chars == 's' or chars == 'c' then return 'a space or a control character' end
  elseif t == 'str' then          -- {NAME, 'str', MAX}
    if #v > a[3] then return 'longer than ' .. a[3] .. ' bytes' end
    if value_chars(v) == 'c' then return 'a control character' end
  elseif t == 'flag' then
    if v ~= '1' and v ~= '0' then return 'not 1 or 0' end
  elseif t == 'choice' then       -- {NAME, 'choice', {WORD = true...}, 'WORD, WORD'}
    if not a[3][v] then return 'not one of ' .. a[4] end
  end
  return nil
end

-- The error of argv for script (nil: it fits ARG_TYPES[script]); `where`
-- names the call ("acquire", "call 2 (renew) of batch") and `at` is the
-- place of argv[1] in the call's ARGV, for the message. A rest argument
-- of type call is run_batch()'s to check.
local function bad_args(script, argv, where, at)
  local types = ARG_TYPES[script]
  local n, last = #argv, types[#types]
  if n < types.need or (not types.rest and n > #types) then
    local most = types.rest and ' or more' or (#types > types.need and ' to ' .. #types or '')
    return redis.error_reply(string.format('ERR fleetsem: %s takes %d%s arguments, not %d', where, types.need, most, n))
  end
  for i = 1, n do
    local a = types[i] or last
    if a[2] == 'call' then return nil end
    local why = arg_fault(a, argv[i])
    if why then
      return redis.error_reply(string.format('ERR fleetsem: argument %d (%s) of %s: %s', at + i - 1, a[1], where, why))
    end
  end
  return nil
end

local function key_fault(script, i, what, why)
  return redis.error_reply(string.format('ERR fleetsem: key %d (%s) of %s: %s', i, what, script, why))
end

-- Why a prefix is not the agent's (an identifier: at most IDENT_MAX_LEN
-- bytes without braces, spaces or control characters) or not the first
-- key's (nil: it is); plain: its characters are known to be.
local function prefix_fault(p, prefix, plain)
  if #p > IDENT_MAX_LEN or (not plain and string.find(p, '[{}%s%c]')) then return 'its prefix is no identifier' end
  if prefix and p ~= prefix then return 'another prefix than the first key\'s' end
  return nil
end

-- A fleet key's prefix and tag ("" untagged) when key is PREFIX:WORD or
-- PREFIX:WORD:{TAG}; nil when it is neither.
local function fleet_key(key, word)
  local p, tag = string.match(key, '^(.+):' .. word .. '(:{[^{}]+})$')
  if p then return p, tag end
  return string.match(key, '^(.+):' .. word .. '$'), ''
end

-- The error of keys of keys.list's words (epoch.lua, follow.lua:
-- PREFIX:WORD[:{TAG}], one prefix and one tag), nil when they fit.
local function bad_ids(script, shape, keys)
  local n = #keys
  if n < shape.need or n > #shape.ids then
    return redis.error_reply(string.format('ERR fleetsem: %s takes %d to %d keys, not %d', script, shape.need,
      #shape.ids, n))
  end
  local prefix, tag
  for i = 1, n do
    local p, t = fleet_key(keys[i], shape.ids[i])
    local why = not p and 'not of its shape' or prefix_fault(p, prefix) or
      (tag and t ~= tag and 'another tag than the first key\'s')
    if why then return key_fault(script, i, shape.ids[i], why) end
    prefix, tag = p, t
  end
  return nil
end

-- A name's first key, "PREFIX:{NAME}:<first suffix>" (prefix and name
-- without braces, spaces or control characters), in one match: a call
-- of a string function costs about as much as a renewal's whole check of
-- a key, so the checks of the most frequent calls make few.
local NAME_KEY = '^([^{}%s%c]+):{([^{}%s%c]+)}:' .. NAME_SUFFIXES[1] .. '$'

-- Why the name keys from keys[at] on are not one name's (nil: they are);
-- prefix: the first name's (nil for the first); returns the key's place,
-- its suffix and why, or the run's prefix.
local function name_fault(keys, at, prefix)
  local p, name = string.match(keys[at], NAME_KEY)
  local plain = p ~= nil
  if not p then
    -- (Only now: why, for the message.)
    p, name = string.match(keys[at], '^(.+):{([^{}]+)}:' .. NAME_SUFFIXES[1] .. '$')
    if not p then return at, NAME_SUFFIXES[1], 'not of its shape' end
    if string.find(name, '[%s%c]') then return at, NAME_SUFFIXES[1], 'its name has a space or a control character' end
  end
  if #name > NAME_MAX_LEN then
    return at, NAME_SUFFIXES[1], 'its name is longer than ' .. NAME_MAX_LEN .. ' bytes'
  end
  local why = prefix_fault(p, prefix, plain)
  if why then return at, NAME_SUFFIXES[1], why end
  local base = p .. ':{' .. name .. '}:'
  for k = 2, NAME_KEYS do
    if keys[at + k - 1] ~= base .. NAME_SUFFIXES[k] then
      return at + k - 1, NAME_SUFFIXES[k], 'not ' .. base .. NAME_SUFFIXES[k]
    end
  end
  return nil, p
end

-- Whether memo has keys[first] to keys[first + n - 1] as a run it
-- passed (a name's keys, or the fleet's) of the prefix given (nil: any).
local function memo_says(memo, keys, first, n, prefix)
  local run = memo[keys[first]]
  if not run or (prefix and run[1] ~= prefix) then return false end
  for k = 2, n do
    if keys[first + k - 1] ~= run[k] then return false end
  end
  return true
end

-- Puts the run from keys[first], of n keys and that prefix, in memo.
local function memo_run(memo, keys, first, n, prefix)
  local run = {prefix}
  for k = 2, n do run[k] = keys[first + k - 1] end
  memo_put(memo, keys[first], run)
end

-- The error of keys for script (nil: they fit KEY_SHAPES[script]).
local function bad_keys(script, keys)
  local shape, n = KEY_SHAPES[script], #keys
  if shape.ids then return bad_ids(script, shape, keys) end
  local names = (n - #FLEET_WORDS) / NAME_KEYS
  if names < 1 or names % 1 ~= 0 or (shape.one and names ~= 1) then
    return redis.error_reply(string.format('ERR fleetsem: %s takes %s keys of a name then %d, not %d keys', script,
      shape.one and 'the' or 'the runs of', #FLEET_WORDS, n))
  end
  local prefix
  for j = 0, names - 1 do
    local first = j * NAME_KEYS + 1
    if not memo_says(NAME_MEMO, keys, first, NAME_KEYS, prefix) then
      local at, what, why = name_fault(keys, first, prefix)
      if at then return key_fault(script, at, what, why) end
      memo_run(NAME_MEMO, keys, first, NAME_KEYS, what)
    end
    prefix = NAME_MEMO[keys[first]][1]
  end
  local first = names * NAME_KEYS + 1
  if memo_says(FLEET_MEMO, keys, first, #FLEET_WORDS, prefix) then return nil end
  -- The fleet's keys: PREFIX:WORD (compared whole), or PREFIX:WORD:{TAG}
  -- with one tag.
  local tag
  for k = 1, #FLEET_WORDS do
    local at, word = names * NAME_KEYS + k, FLEET_WORDS[k]
    local key, plain = keys[at], prefix .. ':' .. word
    local t = ''
    if key ~= plain then
      t = string.sub(key, #plain + 1)
      if string.sub(key, 1, #plain) ~= plain or not string.find(t, '^:{[^{}]+}$') then
        local p = fleet_key(key, word)
        return key_fault(script, at, word, p and p ~= prefix and 'another prefix than the first key\'s' or
          'not of its shape')
      end
    end
    if tag and t ~= tag then return key_fault(script, at, word, 'another tag than the key before\'s') end
    tag = t
  end
  memo_run(FLEET_MEMO, keys, first, #FLEET_WORDS, prefix)
  return nil
end

-- What every function runs first: the error of its call, or nil.
local function bad_call(script, keys, argv)
  return bad_keys(script, keys) or bad_args(script, argv, script, 1)
end
