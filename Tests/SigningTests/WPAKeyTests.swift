// The Wi-Fi key provisioning writes (Crypto.wpaKey): IEEE 802.11i's
// PBKDF2-SHA1, against the standard's test vectors and wpa_passphrase.
import Foundation
import Testing
import TestSupport
import SoundboxCrypto

@Suite struct WPAKeyTests {
    /// IEEE 802.11i-2004, annex H.4.
    @Test(arguments: [("password", "IEEE", "f42c6fc52df0ebef9ebb4b90b38a5f902e83fe1b135a70e23aed762e9710a12e"),
                      ("ThisIsAPassword", "ThisIsASSID", "0dc0d6eb90555ed6419756b9a15ec3e3209b63df707dd508d14581f8982721af")])
    func theStandardsVectors(_ passphrase: String, _ ssid: String, _ key: String) {
        #expect(Crypto.hex(Crypto.wpaKey(passphrase: passphrase, ssid: ssid)) == key)
    }

    /// The same key as wpa_passphrase (wpasupplicant), for an SSID of any bytes.
    @Test func theSameAsWpaPassphrase() throws {
        for (phrase, ssid) in [("secret123", "Shop"), ("pass word! ~", "Café 1")] {
            let r = try CommandRun(["/usr/bin/wpa_passphrase", ssid, phrase])
            try #require(r.status == 0, "wpa_passphrase: \(r.stderr)")
            let line = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("\tpsk=") })
            #expect(Crypto.hex(Crypto.wpaKey(passphrase: phrase, ssid: ssid)) == String(line.dropFirst(5)))
        }
    }
}
