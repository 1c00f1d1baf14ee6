import Testing
import Soundbox

/// The offline summary's decisions (docs/soundboxd.md); the spoken summary
/// against a real daemon and broker is in DaemonTests' OfflineSummaryTests.
@Suite struct SummaryPlanTests {
    let plan = SummaryPlan(minimum: 3, afterSeconds: 60)
    let now: Int64 = 1_000_000_000

    func waiting(_ ages: [(Int64, String?)]) -> [SummaryPlan.Candidate<Int>] {
        ages.enumerated().map { SummaryPlan.Candidate(id: $0.offset + 1, happenedAtMs: now - $0.element.0 * 1000, group: $0.element.1) }
    }

    @Test func onlyAnOldDurableUnplayedHeadWhileNotMutedMayStartOne() {
        let old = now - 60_000, fresh = now - 59_999
        #expect(plan.mayBeDue(headPlays: 0, headDurable: true, headHappenedAtMs: old, now: now, muted: false))
        #expect(!plan.mayBeDue(headPlays: 0, headDurable: true, headHappenedAtMs: fresh, now: now, muted: false))
        #expect(!plan.mayBeDue(headPlays: 1, headDurable: true, headHappenedAtMs: old, now: now, muted: false))   // left playing by a crash
        #expect(!plan.mayBeDue(headPlays: 0, headDurable: false, headHappenedAtMs: old, now: now, muted: false))  // held in memory
        #expect(!plan.mayBeDue(headPlays: 0, headDurable: true, headHappenedAtMs: old, now: now, muted: true))
        #expect(!SummaryPlan(minimum: 0, afterSeconds: 60).mayBeDue(headPlays: 0, headDurable: true, headHappenedAtMs: old, now: now, muted: false))
    }

    @Test func oneSummaryPerCurrencyOfAtLeastTheMinimumOldestFirst() {
        let w = waiting([(90, "CNY"), (80, "INR"), (70, "CNY"), (65, "INR"), (61, "CNY"), (60, "INR"), (10, "CNY")])
        #expect(plan.summaries(w, now: now) == [[1, 3, 5], [2, 4, 6]])   // the fresh CNY (7) is read on its own
    }

    @Test func aCurrencyWithTooFewOrNoWordsIsLeftOut() {
        let w = waiting([(90, "CNY"), (80, "CNY"), (70, "CNY"), (65, "INR"), (61, nil), (60, nil), (60, nil)])
        #expect(plan.summaries(w, now: now) == [[1, 2, 3]])
    }

    @Test func fewerOldPaymentsThanTheMinimumMakeNone() {
        #expect(plan.summaries(waiting([(90, "CNY"), (80, "CNY"), (59, "CNY")]), now: now).isEmpty)
        #expect(SummaryPlan(minimum: 0, afterSeconds: 60).summaries(waiting([(90, "CNY"), (80, "CNY"), (70, "CNY")]), now: now).isEmpty)
    }

    /// Within the goal of speaking within a second or two of the network
    /// coming back (docs/soundboxd.md, "The offline summary").
    @Test func theWaitForABacklogEndsWhenItIsQuietOrAfterASecondAndAHalf() {
        #expect(SummaryPlan.keepWaiting(newestAcceptedMs: now - 249, now: now, armedFor: 1))
        #expect(!SummaryPlan.keepWaiting(newestAcceptedMs: now - 250, now: now, armedFor: 1))
        #expect(SummaryPlan.keepWaiting(newestAcceptedMs: now, now: now, armedFor: 1.4))
        #expect(!SummaryPlan.keepWaiting(newestAcceptedMs: now, now: now, armedFor: 1.5))
        #expect(!SummaryPlan.keepWaiting(newestAcceptedMs: nil, now: now, armedFor: 0))
    }
}
