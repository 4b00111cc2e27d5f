-- The prelude of every lease script: the store sends it, behind
-- fence.lua (backend/internal/redislua) and in front of lua/keys.lua and
-- the script's own text, as one script. Baton's function library
-- (functions.go) holds it once, for all its functions. It defines
-- functions only: each reads KEYS and ARGV when it is called.
--
-- KEYS, the same eight for every lease script, all in K's Cluster slot
-- but the last (see S):
--   K  the lease: "<token> <owner>", then " contended" or " released"
--      when it is not plain, with a PX expiry
--   F  K:fence, the fencing counter: the last token granted
--   L  K:line, the waiting line: owners scored by arrival (server µs)
--   R  K:line-req, what each waiter asked for: "<ttl-ms> <floor> <due-ms>"
--   W  K:watch-mark, set while a store watches K
--   M  K:mailbox: a copy "<token> <owner>" of the lease the last release
--      handed over, expiring with it, which older versions wrote; now
--      only deleted (a waiter reads K)
--   I  "<prefix>:{T}:intact" for a K in hash tag T: the server's time in
--      ms since when the tag's data is known whole; no expiry, one per
--      tag. For a K without a tag of its own, K again: no marker.
--   S  "<prefix>:{T:}:intact" for a tag {T:app}, the tenant's marker:
--      the server's time in ms since when all of the tenant's data is
--      known whole, and the server's run ID; "<prefix>:intact" for other
--      keys; no expiry. On a Cluster, whose scripts touch one slot only,
--      I again: no tenant marker.
--
-- ARGV[1..3], the store's settings, the same on every call: the restart
-- guard in ms (-1: off), the publish command (PUBLISH, or SPUBLISH on a
-- Cluster), and whether a release hands K to the first waiter: '0' for a
-- store that waits for replicas, else 'w<id>', where id (1 to 32 hex
-- digits) names the store's wake-up channel of K, "K wake <id>" (see
-- wakeOf; older versions sent '1': they hand over and have none). A
-- script's own arguments start at ARGV[4].
--
-- A script that did what was asked replies with the lease's token alone;
-- any other reply is an array whose first element says what happened
-- (statuses in redisbackend.go). Numbers travel as decimal strings.
--
-- A script sent with EVALSHA makes the prelude's functions on every call,
-- and pays for each local that one of them captures (an upvalue, which
-- the server allocates per call): the functions the fast paths use
-- therefore read KEYS and ARGV themselves, and the rest are made only
-- when a slow path asks for them (lib and its parts, guarded).

-- read returns K's token, owner and flag ('', ' contended' or
-- ' released'), or nothing when K is missing or not a baton lease.
local function read()
  local v = redis.pcall('GET', KEYS[1])
  if type(v) ~= 'string' then return end
  local tok, own, flag = string.match(v, '^(%d+) (%S+)( ?%l*)$')
  if flag == '' or flag == ' contended' or flag == ' released' then return tok, own, flag end
end

-- clock returns the server's clock in µs.
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- ahead returns a corrupt reply when v, a token read from the Redis key
-- name (what says which), is beyond the fencing limit at the server's clock t (µs;
-- fenceLimit). No grant goes beyond it, so v was forged, or written while
-- the server's clock was far ahead; a caller that took it for a token
-- would hold it as its floor for good. Nil when v is within the limit.
local function ahead(what, name, v, t)
  if tonumber(v) <= fenceLimit(t) then return end
  return {'corrupt', what .. ' ' .. name .. ' holds token ' .. v .. ', more than 366 days ahead of the server\'s clock (' ..
    string.format('%d', t) .. ' µs): no grant made it (forged, or written while the clock was ahead); delete it'}
end

-- guarded returns the restart guard's left, which grant calls for a
-- counter it finds missing, with the functions only it uses: they are
-- made on that slow path alone, not on every call.
local function guarded()
  -- markerAhead handles a marker key (I or S) whose time since (ms) is
  -- ahead of the server's clock now (ms): the clock went back, or the value
  -- was forged, and the marker would refuse fresh keys until the clock
  -- reached it. It resets the marker to now, so that they wait out the
  -- guard once from now, as after a flush, and returns the corrupt reply
  -- that says so; nil when the marker is not ahead.
  local function markerAhead(key, since, now)
    if since <= now then return end
    redis.call('SET', key, string.format('%d', now))
    return {'corrupt', 'marker ' .. key .. ' held ' .. string.format('%d', since) .. ', ' ..
      string.format('%d', since - now) .. ' ms ahead of the server\'s clock (it went back, or the value was forged); ' ..
      'it now holds the server\'s time, and the fresh keys it covers wait out the restart guard once'}
  end

  -- readMarker returns the time in ms that the marker key holds, or false
  -- when it is missing, and the ID of the server's run that wrote it, or
  -- '' (a marker of an older baton, or one reset by markerAhead); or nil
  -- and the corrupt reply for a value that is not "<ms>" or "<ms> <run
  -- id>", or is ahead of the server's clock now (markerAhead).
  local function readMarker(key, now)
    local v = redis.pcall('GET', key)
    if not v then return false, '' end
    local since, run
    if type(v) == 'string' then since, run = string.match(v, '^(%d+) ?(%x*)$') end
    if not since then
      return nil, {'corrupt', 'marker ' .. key .. ' is not a time in ms'}
    end
    since = tonumber(since)
    local bad = markerAhead(key, since, now)
    if bad then return nil, bad end
    return since, run
  end

  -- intactSince returns since when (ms) the data of K's tag is known
  -- whole, and the run ID of the marker that says so, writing the markers
  -- it finds missing; or nil and the corrupt reply. A tag marker I there
  -- says it. A missing I with the tenant's marker S there means a tag new
  -- to the server, not lost: a FLUSHALL, a FLUSHDB or a restart without
  -- data would have taken S too; I takes S's value. With neither (a new server,
  -- or one that lost its data), since is the server's start when that is
  -- nearer than need ms (up is the uptime in s), else now, and both are
  -- written with run, the server's run ID. An I there with no S (markers
  -- of an older baton) writes S from I. A K without a tag (I is K) has no
  -- marker of its own: S answers for it, and is not written.
  local function intactSince(now, up, need, run)
    local K, I, S = KEYS[1], KEYS[7], KEYS[8]
    -- wait is how long a marker of since and by asks grants to wait.
    local function wait(since, by)
      local w = since + need - now
      if by == '' or by ~= run then w = math.max(w, need + 1000 - up * 1000) end
      return w
    end
    local since, irun, server, srun = false, '', false, ''
    if S ~= I then
      server, srun = readMarker(S, now)
      if server == nil then return nil, srun end
    end
    if I == K then return server, srun end
    since, irun = readMarker(I, now)
    if since == nil then return nil, irun end
    if since then
      if S ~= I and not server then redis.call('SET', S, redis.call('GET', I)) end
      -- Both there: each says the data is whole since its time, so the
      -- one that asks for the shorter wait (the tenant's, when an operator
      -- declared it, or when the tag's was written before the tenant's)
      -- holds for the tag too.
      if server and wait(server, srun) < wait(since, irun) then return server, srun end
      return since, irun
    end
    if server then
      redis.call('SET', I, redis.call('GET', S))
      return server, srun
    end
    -- Redis counts the uptime in whole seconds of a clock it reads once a
    -- tick: the server may have started up to a second after it says.
    since = now
    if up * 1000 < need then since = math.min(now, now - up * 1000 + 1000) end
    local v = string.format('%d', since) .. ' ' .. run
    if S ~= I then redis.call('SET', S, v) end
    redis.call('SET', I, v)
    return since, run
  end

  -- left returns how long (ms) a grant for ttl ms of K with no counter
  -- waits for the guard of guard ms at the server's clock t (µs): the
  -- time the data must be known whole (the longer of ttl and guard, from
  -- intactSince) and, unless this run of the server wrote the marker,
  -- the uptime that this needs plus a second; or nil and the corrupt
  -- reply.
  local function left(ttl, guard, t)
    local info = redis.pcall('INFO', 'server')
    if type(info) == 'table' and (string.find(info.err or '', 'NOPERM', 1, true)
        or string.find(info.err or '', 'user executing the script', 1, true)) then
      redis.call('INFO', 'server') -- raise the ACL's refusal: unguarded is not an answer
    end
    local up = type(info) == 'string' and tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
    if not up then return 0 end
    local need = math.max(tonumber(ttl), guard)
    local wait = need + 1000 - up * 1000
    local now, run = math.floor(t / 1000), string.match(info, 'run_id:(%x+)') or ''
    local since, by = intactSince(now, up, need, run)
    if since == nil then return nil, by end
    if since then
      -- A marker this run wrote holds a since not before its start
      -- (or an operator's declaration): the uptime adds nothing.
      if by == run and run ~= '' then wait = 0 end
      wait = math.max(wait, since + need - now)
    end
    return wait
  end

  return left
end

-- grant gives the free K to owner for ttl ms with flag, under the token
-- max(counter, floor, clock in µs) + 1, and returns it; or nil and the
-- refusal: corrupt, floor-ahead (fenceFloor), or {'recovering', ms-left}.
-- c is the counter F as the caller read it (false: missing), or nil to
-- read it here; t is the server's clock in µs, or nil to read it here.
-- The token, the counter's checks and its life are fence.lua's.
--
-- A missing counter means K was never granted, was idle past the
-- counter's life, or the server lost its data: unless the guard is off,
-- grant refuses while less than max(ttl, guard) has passed since the
-- tag's data is known whole (intactSince: the tag's marker I, or for a
-- tag new to the server the tenant's marker S; with neither, the data
-- went without a restart, FLUSHALL or a DEL of baton's keys, or the
-- server is new: the markers are written and grant refuses), and, unless
-- that marker was written in this run of the server (its run ID), while
-- the server's uptime is below that plus a second (Redis counts whole
-- seconds). An operator's marker (Store.DeclareIntact) says "whole since
-- ever". A marker ahead of the clock is reset to now (markerAhead).
-- Such a lease is flagged contended, since a data loss erased watch
-- markers too. A user whose ACL refuses INFO gets that error, not an
-- unguarded grant; a server that reports no uptime (miniredis) is not
-- guarded.
local function grant(owner, ttl, floor, flag, c, t)
  local K, F, guard = KEYS[1], KEYS[2], tonumber(ARGV[1])
  t = t or clock()
  local cn, bad = nil, fenceFloor(floor, t)
  if bad then return nil, bad end
  cn, bad = fenceRead(F, t, c)
  if cn == nil then return nil, bad end
  if not cn then
    if guard >= 0 then
      local left
      left, bad = guarded()(ttl, guard, t)
      if not left then return nil, bad end
      if left > 0 then return nil, {'recovering', string.format('%d', left)} end
    end
    flag = ' contended'
  end
  local tok
  tok, bad = fenceNext(F, cn, tonumber(floor), t, ttl)
  if not tok then return nil, bad end
  redis.call('SET', K, tok .. ' ' .. owner .. flag, 'PX', ttl)
  return tok
end

-- grantFree is the acquiring scripts' fast path, for a K with no lease,
-- no line and no watch marker, which one EXISTS checks with the counter:
-- one key existing must be the counter, which grant reads anyway; none
-- means a fresh (or lost) K, which grant guards. It returns the reply,
-- or nil when K needs a closer look.
local function grantFree(owner, ttl, floor)
  local n = redis.call('EXISTS', KEYS[1], KEYS[3], KEYS[5], KEYS[2])
  if n > 1 then return nil end
  local c = false
  if n == 1 then
    c = redis.pcall('GET', KEYS[2])
    if not c then return nil end
  end
  local tok, refused = grant(owner, ttl, floor, '', c)
  return tok or refused
end

-- lib returns, on a table, the functions every slow path may use: now,
-- classify and holder, and two that add more to the table and return
-- it: joins (live, join and leave: a caller joins K's line or leaves it)
-- and lines (LOOK, place, scan, drop, first, pass and ending: what reads
-- K's line and ends a lease on it). The server makes a function each
-- time its statement runs, on every call: a path makes only the parts it
-- uses (lib().joins(), lib().lines()).
local function lib()
  local K = KEYS[1]

  -- now returns the server's clock in µs, as a number and as a decimal
  -- string, reading it once.
  local nowus, nows
  local function now()
    if not nowus then
      local t = redis.call('TIME')
      nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
      nows = t[1] .. string.sub('00000' .. t[2], -6)
    end
    return nowus, nows
  end

  -- classify says what is on K: nil (free), {'corrupt', why}, or
  -- {'held', owner, token, pttl-ms, flag}.
  local function classify()
    local v = redis.pcall('GET', K)
    if not v then return nil end
    if type(v) ~= 'string' then
      return {'corrupt', 'key ' .. K .. ' is a ' .. redis.call('TYPE', K).ok .. ', not a baton lease'}
    end
    local tok, own, flag = string.match(v, '^(%d+) (%S+)( ?%l*)$')
    if not tok or (flag ~= '' and flag ~= ' contended' and flag ~= ' released') then
      return {'corrupt', 'key ' .. K .. ' holds "' .. string.sub(v, 1, 40) .. '", not a baton lease "<token> <owner>"'}
    end
    return ahead('key', K, tok, now()) or {'held', own, tok, redis.call('PTTL', K), flag}
  end

  -- holder is the reply to a caller that does not hold K: what classify
  -- found (or l, if given), without the flag, or {'free'}.
  local function holder(l)
    l = l or classify()
    if not l then return {'free'} end
    return {l[1], l[2], l[3], l[4]}
  end

  -- s holds the functions lib returns; joins and lines add theirs.
  local s = {now = now, classify = classify, holder = holder, joins = false, lines = false}

  -- joins adds to s the functions that put a caller in K's line or take
  -- it out, live, join and leave, and returns s.
  local function joins()
    local L, R = KEYS[3], KEYS[4]
    local WAKE = string.match(ARGV[3], '^w(%x+)$')

    -- live reports whether a waiter's request (or nil) holds a place at ms.
    local function live(req, ms)
      local due = type(req) == 'string' and tonumber(string.match(req, '^%d+ %d+ (%d+)$'))
      return due and due > ms or false
    end

    -- outlive makes line and requests live at least patience ms (a
    -- decimal string) from now, both with one expiry: a line that has less
    -- left gets twice patience, so that the joins that follow within
    -- patience only read its PTTL.
    local function outlive(patience)
      local p = tonumber(patience)
      if redis.call('PTTL', L) < p then
        redis.call('PEXPIRE', L, 2 * p)
        redis.call('PEXPIRE', R, 2 * p)
      end
    end

    -- join puts owner at the back of the line (or keeps its place) for
    -- patience ms (a decimal string), asking for ttl ms and floor if handed
    -- K. An owner whose place lapsed joins at the back again. Only an
    -- owner already in line has a request to look at.
    local function join(owner, patience, ttl, floor)
      local p = tonumber(patience)
      if p <= 0 then return end
      local us, arrival = now()
      local ms = math.floor(us / 1000)
      if redis.call('ZADD', L, 'NX', arrival, owner) == 0 then
        local old = redis.call('HGET', R, owner)
        if old and not live(old, ms) then redis.call('ZADD', L, arrival, owner) end
      end
      local req = ttl .. ' ' .. floor .. ' ' .. string.format('%d', ms + p)
      if WAKE then
        redis.call('HSET', R, owner, req, 'wake ' .. owner, WAKE)
      else
        redis.call('HSET', R, owner, req)
      end
      outlive(patience)
    end

    -- leave takes owner out of the line; it returns 1 if owner was in it.
    local function leave(owner)
      redis.call('HDEL', R, owner, 'wake ' .. owner)
      return redis.call('ZREM', L, owner)
    end

    s.live, s.join, s.leave = live, join, leave
    return s
  end

  -- lines adds to s LOOK and the functions that read K's line and end a
  -- lease on it, place, scan, drop, first, pass and ending, and returns s.
  local function lines()
    local L, R, W, M = KEYS[3], KEYS[4], KEYS[5], KEYS[6]
    local PUBLISH, HANDS = ARGV[2], ARGV[3] ~= '0'

    -- LOOK bounds the places of K's line that one call looks at, so that
    -- a line stuffed with lapsed or foreign places cannot stall the
    -- server: a call drops at most LOOK lapsed places, and when the first
    -- LOOK have all lapsed it finds nobody live in line (later calls drop
    -- the rest, or the line expires).
    local LOOK = 100

    -- isOwner reports whether name passes the owner rules (backend's
    -- ValidateOwner) as far as bytes tell: 1 to 256 bytes, no space, no C0
    -- or C1 control, no DEL, no bidirectional control. A name of printable
    -- ASCII alone (the common case) passes on one anchored match, a tenth
    -- of the time the five patterns take on a name of 60 bytes; they look
    -- at any other name.
    local function isOwner(name)
      if #name == 0 or #name > 256 then return false end
      if string.find(name, '^[!-~]+$') then return true end
      return not (string.find(name, '[%z\1-\32\127]')
        or string.find(name, '\194[\128-\159]') or string.find(name, '\216\156')
        or string.find(name, '\226\128[\142\143\170-\174]') or string.find(name, '\226\129[\166-\169]'))
    end

    -- denied reports whether err refuses a command to the user running
    -- the script (its ACL predates the command among ACLRules').
    local function denied(err)
      return string.find(err, 'NOPERM', 1, true) or string.find(err, 'user executing the script', 1, true)
    end

    -- place reads the place of the waiter name at ms: true, its ttl and
    -- floor (decimal strings) and its store's wake-up id, if it named one
    -- (see wakeOf), when it is live; false when it has lapsed (or has no
    -- request); or nil and why when it is not in baton's shape:
    -- a name that is no owner (empty, over 256 bytes, a space or control
    -- character), or a request other than "<ttl-ms> <floor> <due-ms>"
    -- with ttl in [1 ms, 365 days], floor below 2^53 - 1 and due a time in
    -- ms. It writes nothing.
    local function place(name, ms)
      local got = redis.pcall('HMGET', R, name, 'wake ' .. name)
      if got.err and denied(got.err) then
        got = {redis.pcall('HGET', R, name), redis.pcall('HGET', R, 'wake ' .. name)} -- an ACL from before HMGET
      end
      if got.err or type(got[1]) == 'table' then
        return nil, 'requests ' .. R .. ' is a ' .. redis.call('TYPE', R).ok .. ', not a hash'
      end
      local req = got[1]
      if not req then return false end
      if not isOwner(name) then
        return nil, 'a waiter in line ' .. L .. ' is named "' .. string.sub(name, 1, 40) .. '", not an owner (no space or control character)'
      end
      local ttl, floor, due = string.match(req, '^(%d+) (%d+) (%d+)$')
      local t = due and #ttl <= 12 and #floor <= 16 and #due <= 16 and tonumber(ttl)
      if not t or t < 1 or t > 31536000000 or tonumber(floor) >= 9007199254740991 then
        return nil, 'waiter ' .. name .. ' in ' .. R .. ' asks for "' .. string.sub(req, 1, 40) ..
          '", not "<ttl-ms> <floor> <due-ms>" with a ttl of 1 ms to 365 days and a floor below 2^53-1'
      end
      return tonumber(due) > ms, string.format('%d', t), string.format('%d', tonumber(floor)), got[2]
    end

    -- wakeOf returns the channel on which a handover to a waiter whose
    -- store named the wake-up id wake (or false) is published: "K wake
    -- <id>", to which only that store subscribes, so that the other
    -- stores waiting for K are not sent it; K's own channel for a waiter
    -- of an older version (no id), for an id not of 1 to 32 hex digits,
    -- and for a K without a hash tag, whose wake-up channel would not be
    -- in K's Cluster slot (the store then subscribes to K: wakeChannel).
    local function wakeOf(wake)
      if not wake or #wake > 32 or not string.find(wake, '^%x+$') then return K end
      local i = string.find(K, '{', 1, true)
      local j = i and string.find(K, '}', i + 1, true)
      if not j or j == i + 1 then return K end
      return K .. ' wake ' .. wake
    end

    -- drop takes the places of names out of the line: their requests
    -- and wake-up ids, and unless popped (scan took them out already)
    -- their places.
    local function drop(names, popped)
      if #names == 0 then return end
      if not popped then redis.call('ZREM', L, unpack(names)) end
      local fields = {}
      for i, name in ipairs(names) do
        fields[2 * i - 1], fields[2 * i] = name, 'wake ' .. name
      end
      redis.call('HDEL', R, unpack(fields))
    end

    -- put puts back into the line the places of pairs (score, name, ...),
    -- which scan popped. A line they emptied lost its expiry with its last
    -- place: it gets the requests' again.
    local function put(pairs)
      if #pairs == 0 then return end
      redis.call('ZADD', L, unpack(pairs))
      if redis.call('PTTL', L) == -1 then
        local left = redis.call('PTTL', R)
        if left > 0 then redis.call('PEXPIRE', L, left) end
      end
    end

    -- scan looks at K's line from rank from on, up to rank LOOK - 1, and
    -- writes nothing. It returns {head = the first live waiter or '', ttl,
    -- floor = what it asked for, rank = the rank after it, names = the
    -- lapsed places before it, after those of names if given}, or nil and
    -- {'corrupt', why} for a place not in baton's shape.
    --
    -- With pop (a release that hands K over, from rank 0), it pops the
    -- places it looks at (ZPOPMIN) instead of reading them, so that the
    -- handover takes its waiter out of the line with no ZREM: the line it
    -- returns is popped (head and lapsed places are out of the line
    -- already), and its score is the head's arrival, for pass to put it
    -- back if K is not handed to it. A place not in baton's shape puts back
    -- every place popped (the line is as it was, but for an expiry it lost
    -- with its last place: see put). A user whose ACL predates ZPOPMIN
    -- among ACLRules' commands gets the line read instead.
    local function scan(from, names, pop)
      local line, ms, popped = {head = '', names = names or {}, popped = pop}, nil, {}
      for rank = from, LOOK - 1 do
        local r
        if pop then r = redis.pcall('ZPOPMIN', L) else r = redis.pcall('ZRANGE', L, rank, rank) end
        if r.err then
          if pop and #popped == 0 and denied(r.err) then
            return scan(from, names)
          end
          return nil, {'corrupt', 'line ' .. L .. ' is a ' .. redis.call('TYPE', L).ok .. ', not a sorted set'}
        end
        if not r[1] then return line end
        if pop then popped[#popped + 1], popped[#popped + 2] = r[2], r[1] end
        ms = ms or math.floor(now() / 1000)
        local live, ttl, floor, wake = place(r[1], ms)
        if live == nil then
          put(popped)
          return nil, {'corrupt', ttl}
        end
        if live then
          line.head, line.ttl, line.floor, line.rank, line.score = r[1], ttl, floor, rank + 1, r[2]
          line.wake = wake
          return line
        end
        line.names[#line.names + 1] = r[1]
      end
      return line
    end

    -- first returns the first live waiter in line, or '', after dropping
    -- the lapsed places in front of it (scan); or nil and {'corrupt', why}
    -- with nothing dropped.
    local function first()
      local line, bad = scan(0)
      if not line then return nil, bad end
      drop(line.names)
      return line.head
    end

    -- handover grants K, which its holder is ending, to line's head (scan)
    -- with the ttl and floor it asked for (the grant overwrites K, flagged
    -- contended), takes it and the lapsed places before it out of the line
    -- and publishes "renewed <token> <ttl> <waiter>" on the waiter's
    -- wake-up channel (wakeOf; a waiter that may have missed it reads K:
    -- see Store.AwaitHandover), and on K's channel too while a store
    -- watches K (its marker W exists), since watchers are told of every
    -- release. It reports whether it did; a refused grant
    -- leaves the line as it was. c is the counter for the grant (see
    -- grant), or nil to read it.
    local function handover(line, c)
      local tok = grant(line.head, line.ttl, line.floor, ' contended', c, (now()))
      if not tok then return false end
      local out = line.names
      out[#out + 1] = line.head
      drop(out, line.popped)
      local msg, ch = 'renewed ' .. tok .. ' ' .. line.ttl .. ' ' .. line.head, wakeOf(line.wake)
      redis.call(PUBLISH, ch, msg)
      if ch ~= K and redis.call('EXISTS', W) == 1 then redis.call(PUBLISH, K, msg) end
      return true
    end

    -- pass ends the lease token on K: it gives K to line's head (scan,
    -- made before the script wrote anything) if the store hands over and
    -- one is in line, and otherwise deletes K and its mailbox (unless gone:
    -- K is already missing), drops the lapsed places and publishes
    -- "released <token> <next>". c is the counter for the handover's
    -- grant, or nil to read it. It reports whether it handed K over.
    local function pass(token, line, gone, c)
      if HANDS and line.head ~= '' and handover(line, c) then return true end
      if line.score then put({line.score, line.head}) end
      if not gone then redis.call('DEL', K, M) end
      drop(line.names, line.popped)
      redis.call(PUBLISH, K, 'released ' .. token .. ' ' .. line.head)
      return false
    end

    -- ending returns the line for pass at the end of a lease: popped if
    -- the store hands over (a handover then needs no ZREM), else read.
    local function ending()
      return scan(0, nil, HANDS)
    end

    s.LOOK, s.place, s.scan, s.drop, s.first, s.pass, s.ending = LOOK, place, scan, drop, first, pass, ending
    return s
  end

  s.joins, s.lines = joins, lines
  return s
end
