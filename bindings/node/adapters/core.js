'use strict'
// What every adapter shares: one user turn's request and intent, the model's call judged with
// its own confirmation fields stripped (only the user confirms, never the model), the user's
// approval turned into a confirmation bound to the pending call, and a deny turned into an
// error the model reads.

const { Policy, Request, Turn, PendingCall } = require('../index.js')

/** A call the policy did not allow; `verdict` is the decision, `message` its JSON result. */
class ToolBlockedError extends Error {
  constructor(verdict) {
    super(JSON.stringify(verdict.toJSON()))
    this.name = 'ToolBlockedError'
    this.verdict = verdict
  }
}

function isPlainArgs(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/**
 * One user turn under a policy: `request`, the intent (`query` to classify or `intent`), and
 * the `turn` that counts its transactional calls.
 */
class TurnGuard {
  constructor(policy, options = {}) {
    if (!(policy instanceof Policy)) throw new TypeError('policy must be a Policy')
    const { request, query, intent, turn } = options
    if (!(request instanceof Request)) throw new TypeError('options.request must be a Request')
    if (turn !== undefined && !(turn instanceof Turn)) throw new TypeError('options.turn must be a Turn')
    this.policy = policy
    this.request = request
    this.turn = turn || new Turn()
    // The intent is classified once per turn, not once per call.
    this.intent = intent !== undefined ? intent : query !== undefined ? policy.classify(query) : undefined
    this.options = this.intent === undefined ? {} : { intent: this.intent }
  }

  /** The names of `names` the model may see, in order. */
  visible(names) {
    return this.policy.offer(this.request, names, this.options)
  }

  /**
   * `args` without the policy's confirmation fields (a new object). Arguments that are neither
   * an object nor JSON text throw (fail closed: nothing is judged in their place).
   */
  strip(args) {
    if (args === undefined || args === null) return this.policy.stripConfirmation({})
    if (!isPlainArgs(args) && typeof args !== 'string') {
      throw new TypeError(`the call's arguments must be an object or JSON text, not ${Array.isArray(args) ? 'array' : typeof args}`)
    }
    return this.policy.stripConfirmation(args)
  }

  /**
   * The decision on the model's own call, its confirmation fields stripped, without counting
   * it: `confirm` means ask the user (the verdict's `pending` is the call to keep).
   */
  judge(tool, args) {
    const probe = new Turn(this.turn.transactionalCalls)
    return this.policy.checkCall(this.request, tool, this.strip(args), { ...this.options, turn: probe })
  }

  /**
   * The decision on a call about to run. With `pending` (the call the user approved), the
   * call is repeated with a confirmation and checked against it (same tool, same arguments);
   * without, the model's confirmation fields are stripped first. Counts the call in the turn.
   */
  execute(tool, args, pending) {
    const stripped = this.strip(args)
    if (pending) {
      const field = this.policy.confirmFields[0]
      const confirmed = field === undefined ? stripped : { ...stripped, [field]: true }
      return this.policy.checkCall(this.request, tool, confirmed, { ...this.options, turn: this.turn, pending })
    }
    return this.policy.checkCall(this.request, tool, stripped, { ...this.options, turn: this.turn })
  }

  /** `execute`, throwing `ToolBlockedError` unless the call may run; returns its arguments. */
  authorize(tool, args, pending) {
    const verdict = this.execute(tool, args, pending)
    if (verdict.decision !== 'allow') throw new ToolBlockedError(verdict)
    return verdict.argsForExecution
  }
}

module.exports = { TurnGuard, ToolBlockedError, PendingCall }
