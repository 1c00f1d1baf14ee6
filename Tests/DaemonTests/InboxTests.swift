import Foundation
import Soundbox
import SoundboxAudio
@testable import SoundboxDaemon
import Testing
import TestSupport
import TestRig

/// `Inbox` in process: every kind of message from the broker through the
/// same steps (read, verify, validate, act), each refusal said the way its
/// kind says it, and the next message flowing on (SignedMessageTests and
/// RemoteSurfaceTests drive the same through a real broker and soundboxd).
@Suite struct InboxTests {
    /// The parts the inbox uses, on a scratch database; `signed` demands
    /// signatures and holds the backend's public key.
    final class Box {
        /// The backend's key folder.
        let scratch = Scratch()
        let parts: Parts
        let inbox: Inbox
        let key: BackendKey?
        var storage: Storage { parts.storage }
        var settings: Settings { parts.settings }
        var receipts: [String] { parts.receipts }
        var queued: [String] { parts.queued }

        init(signed: Bool) throws {
            var set: [String: String] = [:]
            if signed {
                let made = try BackendKey(dir: scratch.path + "/backend", name: "backend")
                let folder = scratch.path + "/keys"
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: made.publicPath, toPath: folder + "/backend.pem")
                set = [TextKey.paymentSigning.key.name: "required", TextKey.paymentKeys.key.name: folder]
                key = made
            } else {
                key = nil
            }
            parts = try Parts(device: "inbox-test", set)
            inbox = parts.inbox()
        }

        @discardableResult
        func receive(_ kind: Signature.Kind, _ json: String, retained: Bool = false) -> String? {
            inbox.receive(kind, Array(json.utf8), retained: retained)
        }
        func signed(_ json: String, ts: Int64 = Int64(Date().timeIntervalSince1970)) throws -> String {
            try #require(key).sign(json, device: parts.deviceID, now: ts)
        }
        func answer(_ text: String?) throws -> [String: Any] {
            let t = try #require(text, "an answer on config/applied")
            return try #require(try JSONSerialization.jsonObject(with: Data(t.utf8)) as? [String: Any])
        }
    }

    /// A payment is queued; a malformed one, an amount above the limit and
    /// a retained one are each a rejected receipt with its reason, and the
    /// payment after them is queued as well.
    @Test func paymentsAreQueuedOrRejectedWithAReason() throws {
        let box = try Box(signed: false)
        #expect(box.receive(.payment, #"{"id":"P1","amount":"12.34"}"#) == nil)
        box.receive(.payment, #"{"id":"P2","amount":"12.3x"}"#)
        box.receive(.payment, #"{"id":"P3","amount":"100000000"}"#)
        box.receive(.payment, #"{"id":"P4","amount":"1.00"}"#, retained: true)
        box.receive(.payment, #"{"id":"P5","amount":"0.05"}"#)
        #expect(box.queued == ["P1", "P5"])
        let rejected = box.receipts.filter { $0.contains(#""status":"rejected""#) }
        #expect(rejected.count == 3)
        #expect(rejected.contains { $0.contains(#""id":"P3""#) && $0.contains("amount is above the limit of 99999999.99") })
        #expect(rejected.contains { $0.contains(#""id":"P4""#) && $0.contains(PaymentMessage.retainedReason) })
        #expect(rejected.contains { $0.contains(#""id":"P2""#) })
    }

    /// With signing required, an unsigned message of each kind is a rejected
    /// receipt naming its kind, and changes nothing: no payment queued, no
    /// setting changed, no answer on config/applied (a forged config cannot
    /// replace the retained answer).
    @Test func unsignedMessagesOfEveryKindAreRefusedBeforeTheyAct() throws {
        let box = try Box(signed: true)
        let volume = box.settings.current[.audioVolume]
        box.receive(.payment, #"{"id":"U1","amount":"1.00"}"#)
        #expect(box.receive(.config, #"{"audio.volume":\#(volume == 3 ? 4 : 3)}"#) == nil)
        box.receive(.cmd, #"{"cmd":"say","id":"U2","amount":"2.00"}"#)
        #expect(box.queued.isEmpty)
        #expect(box.settings.current[.audioVolume] == volume)
        let rejected = box.receipts.filter { $0.contains(#""status":"rejected""#) }
        #expect(rejected.count == 3)
        #expect(rejected.contains { $0.contains(#""id":"U1""#) })
        #expect(rejected.contains { $0.contains(#""kind":"config""#) })
        #expect(rejected.contains { $0.contains(#""kind":"cmd""#) })

        // Signed, the same kinds go through.
        box.receive(.payment, try box.signed(#"{"id":"S1","amount":"1.00"}"#))
        #expect(try box.answer(box.receive(.config, try box.signed(#"{"audio.volume":3}"#)))["ok"] as? Bool == true)
        #expect(box.settings.current[.audioVolume] == 3)
        box.receive(.cmd, try box.signed(#"{"cmd":"say","id":"S2","amount":"2.00"}"#))
        #expect(box.queued == ["S1", "S2"])
    }

    /// Genuine but stale: a config older than the one applied last, a
    /// command whose nonce was used before. Each is refused at the verify
    /// step with a rejected receipt, and acts no more.
    @Test func aReplayedConfigOrCommandIsRefused() throws {
        let box = try Box(signed: true)
        let now = Int64(Date().timeIntervalSince1970)
        let older = try box.signed(#"{"audio.volume":2}"#, ts: now - 60)
        #expect(try box.answer(box.receive(.config, try box.signed(#"{"audio.volume":7}"#, ts: now)))["ok"] as? Bool == true)
        #expect(box.receive(.config, older) == nil)
        #expect(box.settings.current[.audioVolume] == 7, "a replayed config cannot undo a later one")

        let say = try box.signed(#"{"cmd":"say","id":"N1","amount":"1.00"}"#)
        box.receive(.cmd, say)
        box.receive(.cmd, say)
        #expect(box.queued == ["N1"])
        #expect(!box.receipts.contains { $0.contains(#""status":"duplicate""#) },
                "refused for its nonce before it reaches the payment's dedup")
        let stale = box.receipts.filter { $0.contains(#""status":"rejected""#) }
        #expect(stale.count == 2)
        #expect(stale.contains { $0.contains(#""kind":"config""#) && $0.contains("older") })
        #expect(stale.contains { $0.contains(#""kind":"cmd""#) && $0.contains("used before") })
    }

    /// Config: a bad key is answered with the reason and nothing applied; a
    /// retained config the same as the last one applied says nothing (it
    /// comes again at every reconnect), though a technician changed a key
    /// since; an empty retained message (the config cleared) says nothing.
    @Test func configIsAnsweredOnceAndARetainedRepeatChangesNothing() throws {
        let box = try Box(signed: false)
        let bad = try box.answer(box.receive(.config, #"{"audio.volume":11,"voice.lang":"zh-CN"}"#))
        #expect(bad["ok"] as? Bool == false)
        #expect((bad["rejected"] as? [String: Any])?.keys.sorted() == ["audio.volume"])
        let malformed = try box.answer(box.receive(.config, #"{"audio.volume":"#))
        #expect(malformed["ok"] as? Bool == false && malformed["error"] is String)

        let good = try box.answer(box.receive(.config, #"{"audio.volume":5}"#, retained: true))
        #expect(good["ok"] as? Bool == true)
        _ = try box.settings.set([IntKey.audioVolume.key.name: "9"], from: .local)
        #expect(box.receive(.config, #"{"audio.volume":5}"#, retained: true) == nil)
        #expect(box.settings.current[.audioVolume] == 9)
        #expect(box.receive(.config, "", retained: true) == nil)
        #expect(try box.answer(box.receive(.config, #"{"audio.volume":5}"#))["ok"] as? Bool == true,
                "not retained: a backend that sends it again means it")
        #expect(box.settings.current[.audioVolume] == 5)
        #expect(box.receipts.isEmpty, "config is answered on config/applied, not by receipts")
    }

    /// Commands: a retained one, a malformed one and an unknown one run
    /// nothing and make no receipt; the next one runs.
    @Test func aRetainedOrMalformedCommandRunsNothing() throws {
        let box = try Box(signed: false)
        box.receive(.cmd, #"{"cmd":"say","id":"C1","amount":"1.00"}"#, retained: true)
        box.receive(.cmd, #"{"cmd":"say","id":"C2","amount":"1.0x"}"#)
        box.receive(.cmd, #"{"cmd":"format"}"#)
        box.receive(.cmd, "[")
        #expect(box.queued.isEmpty)
        #expect(box.receipts.isEmpty)
        box.receive(.cmd, #"{"cmd":"say","id":"C3","amount":"1.00"}"#)
        #expect(box.queued == ["C3"])
    }
}
