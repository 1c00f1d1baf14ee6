import Soundbox
import Testing

/// Every receipt of a payment comes from its transition (one place).
@Suite struct PaymentTransitionTests {
    let ms: Int64 = 1_764_415_001_999

    @Test func eachTransitionHasItsReceipt() {
        #expect(PaymentTransition.accepted.receipt(id: "T1", at: ms).json == #"{"id":"T1","status":"queued","ts":1764415001}"#)
        #expect(PaymentTransition.duplicate.receipt(id: "T1", at: ms, durable: false).json
                == #"{"id":"T1","status":"duplicate","ts":1764415001,"durable":false}"#)
        #expect(PaymentTransition.finished(.expired, reason: "stale").receipt(id: "T1", at: ms).json
                == #"{"id":"T1","status":"expired","ts":1764415001,"reason":"stale"}"#)
        #expect(PaymentTransition.finished(.played, reason: nil, summary: true).receipt(id: "T1", at: ms).json
                == #"{"id":"T1","status":"played","ts":1764415001,"summary":true}"#)
    }

    @Test func everyFinalStateIsAReceiptStatusOfTheSameName() {
        for state in PaymentState.allCases where !state.isPending {
            #expect(PaymentTransition.finished(state, reason: nil).receipt(id: "T", at: ms).status.rawValue == state.rawValue)
        }
    }

    @Test func aRejectionEchoesOnlyAValidID() {
        #expect(Receipt.rejected(id: "T 1", reason: "bad", at: ms).id == nil)
        #expect(Receipt.rejected(id: "T1", reason: "bad", kind: "cmd", at: ms).json
                == #"{"id":"T1","kind":"cmd","status":"rejected","ts":1764415001,"reason":"bad"}"#)
    }
}
