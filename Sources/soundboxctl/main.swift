import Soundbox
